"""SGLang: launch profile, log signatures and the `/server_info` reader.

`/server_info` returns the server args at the top level, the scheduler info
(`max_total_num_tokens`, ...), `internal_states` (one dict per data-parallel rank, with
`avg_spec_accept_length` when speculative decoding runs) and `version`.  Read in the
real http_server.py / scheduler of sglang 0.5.5, 0.5.10 and 0.5.23: 0.5.5 serves only
`/get_server_info`; from 0.5.10 `/server_info` is the endpoint and `/get_server_info`
logs a deprecation warning on every call ("will be removed"), so `/server_info` is read
first.  Their `internal_states` carry the server args, `last_gen_throughput`,
`memory_usage` and `avg_spec_accept_length`, not running/queued counts or token usage:
those stay None unless a build adds them.
"""

from __future__ import annotations

import json
from typing import Any

from campaign.domain.models import FailureClass as FC
from tools.engines.base import EngineMetrics, EngineProfile
from tools.engines.startup_log import read_sglang_startup
from tools.server.triage import TriageRule, rule

#: as SGLang's documentation starts a server (`python -m sglang.launch_server --model-path MODEL`)
COMMAND = "{python} -m sglang.launch_server --model-path {model} --host {host} --port {port} {flags}"

#: what SGLang reads from its environment besides the playbook's env.
OWN_ENV = (
    "SGLANG_*",
    "SGL_*",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OMP_NUM_THREADS",
    "TORCH_HOME",
    "TRITON_CACHE_DIR",
    "FLASHINFER_WORKSPACE_BASE",
    "XDG_CACHE_HOME",
)

TRIAGE_RULES: tuple[TriageRule, ...] = (
    rule(
        FC.oom,
        r"Not enough memory\. Please try to increase --mem-fraction-static|"
        r"max_total_num_tokens.*(too small|must be|<= 0)|KV cache pool.*(too small|is full)|"
        r"\bruns out of memory\. Please set a smaller number for",
        60,
        "too little memory for the KV cache",
    ),
    # the KV allocators' RuntimeError (mem_cache/common.py); not the scheduler's
    # "Decode out of memory happened" warning, which retracts requests and goes on
    rule(FC.oom, r"(Decode|Prefill) out of memory\. Try to lower your batch size", 60, "KV cache slots ran out"),
    rule(
        FC.engine_dead,
        r"Rank \d+ scheduler is dead|Scheduler or DataParallelController \d+ terminated|"
        r"Received sigquit from a child proces",
        70,
        "SGLang scheduler died",
        consequence=True,
    ),
    rule(
        FC.exited,
        r"is not a local folder and is not a valid model identifier|"
        r"does not appear to have a file named config\.json|Can't load the configuration of",
        65,
        "model not found",
    ),
    rule(
        FC.exited,
        r"context_length.*(greater than|exceeds).*(derived|model)|"
        r"Unsupported speculative algorithm|speculative.algorithm.*(not supported|invalid)",
        65,
        "engine rejected the configuration",
    ),
)

#: `/server_info` is `{**asdict(server_args), **scheduler_info, "internal_states", "version"}`
#: (+ "kv_events" since 2025; sglang/srt/entrypoints/http_server.py); the scheduler's part is
#: {"status": "ready", "max_total_num_tokens", "max_req_input_len"}.  What is not a setting:
_INFO_ONLY = {"internal_states", "version", "kv_events", "status"}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _numbers(states: list[dict[str, Any]], key: str) -> list[float]:
    return [float(s[key]) for s in states if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]


def parse_metrics(body: str) -> EngineMetrics:
    """`/server_info` JSON -> engine-neutral counters (means over DP ranks)."""
    info = json.loads(body)
    if not isinstance(info, dict):
        raise ValueError("server_info did not return a JSON object")
    states = [s for s in info.get("internal_states") or [] if isinstance(s, dict)]
    running = _numbers(states, "num_running_reqs")
    waiting = _numbers(states, "num_queue_reqs")
    return EngineMetrics(
        engine="sglang",
        spec_accept_length=_mean(_numbers(states, "avg_spec_accept_length")),
        kv_cache_usage=_mean(_numbers(states, "token_usage")),
        running_requests=sum(running) if running else None,
        waiting_requests=sum(waiting) if waiting else None,
        server_args={k: v for k, v in info.items() if k not in _INFO_ONLY},
    )


#: what SGLang resolves at start-up from other flags (its ServerArgs post-init and the
#: scheduler's memory plan, both in `/server_info`): the request limit from the KV cache
#: left after weights, draft, graphs and activations, the speculative defaults from the
#: algorithm, the scheduler's token budget.  The simulated node models the same rules.
MEMORY_FLAGS = (
    "mem-fraction-static",
    "cuda-graph-max-bs",
    "disable-cuda-graph",
    "chunked-prefill-size",
    "kv-cache-dtype",
    "max-total-tokens",
    "tp-size",
    "speculative-algorithm",
)
SPECULATIVE_DERIVED: dict[str, tuple[str, ...]] = {
    "speculative-num-steps": ("speculative-algorithm",),
    "speculative-eagle-topk": ("speculative-algorithm",),
    "speculative-num-draft-tokens": ("speculative-algorithm", "speculative-num-steps"),
}
_MEMORY = (*MEMORY_FLAGS, "context-length", "max-running-requests", "page-size", "attention-backend")
REPORTED_DERIVED: dict[str, tuple[str, ...]] = {
    **SPECULATIVE_DERIVED,
    "max-running-requests": _MEMORY,
    "max-total-num-tokens": _MEMORY,
    "max-req-input-len": ("context-length", *_MEMORY),
    "cuda-graph-max-bs": ("tp-size", "speculative-algorithm", "mem-fraction-static", "disable-cuda-graph"),
    "chunked-prefill-size": ("tp-size", "mem-fraction-static"),
    "mem-fraction-static": ("tp-size", "speculative-algorithm", "chunked-prefill-size", "cuda-graph-max-bs"),
}
#: another spelling of a flag -> the name SGLang reports it under
REPORTED_ALIASES = {"tp": "tp-size", "dp": "dp-size", "ep": "ep-size"}

PROFILE = EngineProfile(
    name="sglang",
    package="sglang",
    command=COMMAND,
    own_env=OWN_ENV,
    metrics_path="/server_info",
    metrics_fallback_paths=("/get_server_info",),
    startup_timeout_s=900.0,
    triage_rules=TRIAGE_RULES,
    metrics_parser=parse_metrics,
    reported_args=lambda args: (args, {}),
    startup_reader=read_sglang_startup,
    reported_derived=REPORTED_DERIVED,
    reported_aliases=REPORTED_ALIASES,
)
