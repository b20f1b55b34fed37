"""The bundled simulated node (an SGLang stand-in): its `/server_info` reader, so the
campaign treats every engine through one profile interface."""

from __future__ import annotations

import json

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
        server_args={k: info[k] for k in ("flags", "env", "kv_capacity_tokens", "max_running_requests",
                                          "profile", "cuda", "model", "time_scale") if k in info},
    )


PROFILE = EngineProfile(
    name="simulated", command=COMMAND, metrics_path="/server_info", startup_timeout_s=900.0,
    metrics_parser=parse_metrics, bonus_token_in_accepted=True,
)
