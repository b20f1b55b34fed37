"""How a result is decided and when the campaign stops: the verdict's statistics, the
review gates and the budget."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from campaign.playbook.common import Strict

__all__ = ["BudgetSpec", "CorrectnessSpec", "LatencyLimit", "RepeatsSpec", "ReviewSpec", "VerdictSpec"]


class RepeatsSpec(Strict):
    min: int = Field(default=2, ge=1, description="interleaved rounds measured at least")
    max: int = Field(default=6, ge=1, description="rounds measured at most (adaptive policy)")
    baseline: int = Field(
        default=4,
        ge=2,
        description=(
            "launches of a baseline measured where the node has none in this environment yet "
            "(campaign start, a changed fingerprint): the noise floor the first experiments "
            "rest on (campaign.verdict.noise.baseline_launches)"
        ),
    )

    @model_validator(mode="after")
    def _order(self) -> RepeatsSpec:
        if self.max < self.min:
            raise ValueError(f"repeats.max ({self.max}) is below repeats.min ({self.min})")
        return self


class LatencyLimit(Strict):
    metric: Literal["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"] = Field(
        default="ttft_ms",
        description=(
            "the latency measured: time to first token, inter-token latency, time per output token, end to end"
        ),
    )
    stat: Literal["mean", "p50", "p90", "p99"] = Field(default="p99", description="the statistic of it per level")
    max_ms: float = Field(
        gt=0, description="the limit; at a level where only one side meets it, that side wins", examples=[500]
    )


class CorrectnessSpec(Strict):
    enabled: bool = Field(
        default=True, description="compare greedy outputs with the baseline's before any speed verdict"
    )
    prompts: int = Field(default=8, ge=1, description="fixed prompts compared")
    max_tokens: int = Field(default=32, ge=1, description="greedy tokens generated per prompt")
    tolerance: float = Field(default=0.0, ge=0, le=1, description="share of prompts allowed to differ")


class VerdictSpec(Strict):
    metric: Literal["output_tokens_per_s", "requests_per_s"] = Field(
        default="output_tokens_per_s", description=("the figure compared at every level")
    )
    min_effect_pct: float = Field(
        default=2.0,
        ge=0,
        description=(
            "the smallest change that counts: a WIN needs a level whose interval lies above it, and a loss "
            "beyond it ruled out everywhere"
        ),
    )
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="the family's confidence level")
    repeats: RepeatsSpec = Field(default_factory=RepeatsSpec, description="how many launches a side takes")
    policy: Literal["adaptive", "fixed"] = Field(
        default="adaptive",
        description=(
            "adaptive: look after every round from repeats.min to repeats.max and stop when decided; "
            "fixed: exactly repeats.min rounds"
        ),
    )
    interleave: bool = Field(
        default=True,
        description=("measure candidate and baseline in alternating rounds (C B C B) so the node's drift cancels"),
    )
    latency_limit: LatencyLimit | None = Field(default=None, description="a latency a side must meet to win a level")
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec, description="the greedy-output check")


class ReviewSpec(Strict):
    after_no_win_streak: int | None = Field(
        default=None,
        ge=1,
        description=("stop for review (exit 3) after this many experiments in a row without a WIN"),
        examples=[7],
    )
    after_consecutive_dead_ends: int | None = Field(
        default=None, ge=1, description=("stop for review after this many DEAD ENDs in a row"), examples=[3]
    )
    before_patch: bool = Field(default=True, description="stop for approval before an engine patch is applied")
    on_environment_change: bool = Field(
        default=False,
        description=("stop for review when the node's fingerprint changes (CUDA, driver, engine version)"),
    )
    on_budget: bool = Field(
        default=True,
        description="stop for review when max_experiments, max_hours or max_queue_hours is reached, "
        "instead of finishing",
    )


class BudgetSpec(Strict):
    max_experiments: int = Field(default=50, ge=1, description="experiments in the whole campaign")
    max_hours: float = Field(
        default=48, gt=0, description="node time; a Slurm job's wait in the queue is not node time"
    )
    max_queue_hours: float | None = Field(
        default=None, gt=0, description="time waiting for a Slurm allocation", examples=[12]
    )
    stop_after_dead_ends: int | None = Field(
        default=None, ge=1, description="finish after this many DEAD ENDs in a row", examples=[10]
    )
    max_infra_retries: int = Field(
        default=2,
        ge=0,
        description=(
            "retries of an infrastructure failure (node unreachable, port taken) before INCONCLUSIVE (infrastructure)"
        ),
    )
