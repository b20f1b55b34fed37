"""The bundled simulated node (an SGLang stand-in): its `/server_info` reader, so the
campaign treats every engine through one profile interface."""

from __future__ import annotations

import json
from typing import Any

from tools.engines import sglang
from tools.engines.base import EngineMetrics, EngineProfile

COMMAND = "{python} -m tools.simnode --host {host} --port {port} {flags}"


def parse_metrics(body: str) -> EngineMetrics:
    """`/server_info` JSON (see docs/ARCHITECTURE.md, tools/simnode) -> counters."""
    info = json.loads(body)
    if not isinstance(info, dict):
        raise ValueError("server_info did not return a JSON object")
    accept = info.get("spec_accept_length")
    drafts, accepted = info.get("spec_requests_total"), info.get("spec_accept_tokens_total")
    return EngineMetrics(
        engine="simulated",
        spec_accept_length=float(accept) if isinstance(accept, (int, float)) and accept else None,
        spec_drafts=float(drafts) if isinstance(drafts, (int, float)) else None,
        spec_accepted_tokens=float(accepted) if isinstance(accepted, (int, float)) else None,
        server_args={
            k: info[k]
            for k in (
                "flags",
                "env",
                "kv_capacity_tokens",
                "max_running_requests",
                "profile",
                "cuda",
                "model",
                "time_scale",
            )
            if k in info
        },
    )


def reported_args(args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The simulated node reports `{"flags": ..., "env": ...}` (tools/simnode/server.py)."""
    flags, env = args.get("flags"), args.get("env")
    return (flags if isinstance(flags, dict) else {}), (env if isinstance(env, dict) else {})


#: what the simulated node resolves at start-up and reports under its own key
#: (tools/simnode/server.py `effective_flags`, perfmodel.py `memory_plan`): SGLang's rules,
#: which it stands in for, without the scheduler's token budget.
REPORTED_DERIVED: dict[str, tuple[str, ...]] = {
    "max-running-requests": sglang.MEMORY_FLAGS,
    **sglang.SPECULATIVE_DERIVED,
}
REPORTED_ALIASES = sglang.REPORTED_ALIASES

PROFILE = EngineProfile(
    name="simulated",
    command=COMMAND,
    metrics_path="/server_info",
    startup_timeout_s=900.0,
    metrics_parser=parse_metrics,
    bonus_token_in_accepted=True,
    reported_args=reported_args,
    reported_derived=REPORTED_DERIVED,
    reported_aliases=REPORTED_ALIASES,
)
