"""What one launch of one config produced: the port `Node.measure` returns it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from campaign.domain.models import (
    INFRASTRUCTURE_FAILURES,
    Failure,
    ReportedConfig,
    SweepResult,
)

__all__ = ["Measurement"]


class Measurement(BaseModel):
    """What one launch of one config produced."""

    sweeps: dict[str, SweepResult] = Field(default_factory=dict)
    failure: Failure | None = None
    outputs: list[str] | None = None  # greedy outputs for the correctness gate
    reported: ReportedConfig | None = None  # the config the server says it runs (engine profile)
    command: str = ""
    log_excerpt: list[str] = Field(default_factory=list)
    node_seconds: float = 0.0
    wall_seconds: float = 0.0
    queue_seconds: float = 0.0  # waiting for an allocation (Slurm): not node time
    time_scale: float = 1.0
    stats: dict[str, dict[str, float]] = Field(default_factory=dict)  # workload -> server-side figures

    @property
    def infrastructure_fault(self) -> bool:
        return self.failure is not None and self.failure.failure_class in INFRASTRUCTURE_FAILURES
