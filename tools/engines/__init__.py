"""Engine profiles by name: what is engine-specific (launch command template,
environment defaults, log signatures for triage, live-metrics reader).

    from tools.engines import engine_profile
    profile = engine_profile(playbook.server.engine)
    launch = build_launch(profile, config, model=..., port=..., fill=...)  # tools.engines.launch_spec
    failure = profile.classify(exit_code, log_lines)     # base rules + the engine's
    metrics = profile.read_metrics("http://127.0.0.1:8000")
"""

from __future__ import annotations

from campaign.domain.errors import UserError
from tools.engines import sglang, simulated, vllm
from tools.engines.base import EngineMetrics, EngineProfile
from tools.engines.setup_env import VllmSetup, read_vllm_setup

ENGINES: dict[str, EngineProfile] = {p.name: p for p in (vllm.PROFILE, sglang.PROFILE, simulated.PROFILE)}


def engine_profile(name: str) -> EngineProfile:
    """The profile of `name` (the playbook's `server.engine`)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UserError(
            f"server.engine: unknown engine {name!r} (fix: use one of {', '.join(sorted(ENGINES))})"
        ) from None


__all__ = ["ENGINES", "EngineMetrics", "EngineProfile", "VllmSetup", "engine_profile", "read_vllm_setup"]
