"""Domain records: what the verdict logic returns, what the store hands out and what
the journal renders.  Pure data (pydantic), no I/O, so every consumer can be tested
with plain numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from campaign.domain.models import (
    ConfigChange,
    EffectiveConfig,
    Failure,
    FailureClass,
    Fingerprint,
    LevelResult,
    ReportedChange,
)
from campaign.domain.source import PatchRecord
from campaign.domain.work import Work

VerdictKind = Literal["win", "dead_end", "inconclusive"]
Winner = Literal["candidate", "baseline", "tie"]
CampaignStatus = Literal["running", "awaiting_review", "finished", "failed"]


class LevelComparison(BaseModel):
    """Candidate vs baseline at one concurrency level of one workload."""

    workload: str
    concurrency: int
    metric: str = "output_tokens_per_s"
    baseline_mean: float
    candidate_mean: float
    delta_pct: float  # (candidate / baseline - 1) * 100
    ci_low_pct: float  # confidence interval of delta_pct
    ci_high_pct: float
    # one-sided lower bound of delta_pct at the playbook's confidence, without the
    # multiplicity correction: the per-level test of "no loss beyond m" (see verdict.py)
    loss_bound_pct: float | None = None
    # degrees of freedom and per-level confidence behind the interval (the futility rule
    # projects how the t quantile shrinks with more repeats)
    df: float | None = None
    level_confidence: float | None = None
    n_baseline: int
    n_candidate: int
    winner: Winner
    baseline_meets_limit: bool | None = None  # latency limit, where the playbook sets one
    candidate_meets_limit: bool | None = None
    # the workload's levels showed no difference: this level carries the common effect
    common: bool | None = None

    @property
    def limit_decided(self) -> bool:
        """The latency limit, met by one side only, gave this level its winner."""
        return self.baseline_meets_limit is not None and self.baseline_meets_limit != self.candidate_meets_limit


class WorkloadEffect(BaseModel):
    """One workload's common effect across its levels, with the noise that sized it
    (launches as the unit: `campaign.verdict.launches`)."""

    workload: str
    delta_pct: float
    low_pct: float
    high_pct: float
    se_log: float
    df: float | None = None
    levels_differ_p: float | None = None  # F test of level-by-side contrasts; None: one level
    common: bool = True  # the levels were judged on the common effect
    rounds_baseline: int = 0
    rounds_candidate: int = 0
    noise_pct: float | None = None  # one launch's spread at one level, baseline side
    candidate_noise_pct: float | None = None
    prior_overruled: bool = False  # the candidate was much noisier than the node
    stalled_baseline: int = 0  # levels and launches screened as stalls (campaign.verdict.screen)
    stalled_candidate: int = 0


class CorrectnessResult(BaseModel):
    prompts: int
    mismatches: int
    tolerance: float
    passed: bool
    examples: list[str] = Field(default_factory=list)


class Verdict(BaseModel):
    """The outcome of one experiment: a pure function of measurements and policy."""

    kind: VerdictKind
    reason: str
    failure_class: FailureClass | None = None
    levels: list[LevelComparison] = Field(default_factory=list)
    regimes: dict[str, Literal["candidate", "baseline", "mixed", "tie"]] = Field(default_factory=dict)
    confounded_by: list[ConfigChange] = Field(default_factory=list)
    reported_diff: list[ReportedChange] = Field(default_factory=list)  # what the two servers report differently
    confidence: float = 0.95
    min_effect_pct: float | None = None  # the bar a level had to clear (None: recorded before it was kept)
    revisit_on: list[str] = Field(default_factory=list)
    correctness: CorrectnessResult | None = None
    headline_delta_pct: float | None = None  # primary workload's effect, for the scoreboard
    notes: list[str] = Field(default_factory=list)  # provenance: the exact work, why workloads disagree
    effects: list[WorkloadEffect] = Field(default_factory=list)  # per workload: common effect, noise used
    noise: str = ""  # "node noise 1.4% from 14 launches": the prior the intervals used
    stopped: str = ""  # why the rounds stopped where they did


class DeadEnd(BaseModel):
    hypothesis: str
    experiment_id: str
    reason: str
    failure_class: FailureClass | None = None
    revisit_on: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # components at the time
    reopened: bool = False  # a later fingerprint changed a revisit component


#: the latency figures every level row carries (ms, node time): `LevelResult` stats
LATENCY_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
LATENCY_STATS = ("p50", "p99")

#: side ("candidate", "baseline") -> metric ("ttft_ms") -> stat ("p99") -> ms, the mean over
#: the side's launches (the statistic the latency limit is judged on: campaign.verdict.rule)
LevelLatency = dict[str, dict[str, dict[str, float]]]


class LatencyLimitView(BaseModel):
    """The playbook's latency limit, as the journal and `show --json` print it."""

    metric: str
    stat: str
    max_ms: float


class LevelRow(BaseModel):
    """Per-level means for the journal's tables and plots."""

    workload: str
    concurrency: int
    baseline: float | None = None
    candidate: float | None = None
    comparison: LevelComparison | None = None
    latency: LevelLatency = Field(default_factory=dict)


class ExperimentView(BaseModel):
    id: str
    hypothesis: str
    attempt: int = 1
    rationale: str = ""
    source: Literal["playbook", "llm", "review", "reopened"] = "playbook"
    node: str = ""
    status: Literal["running", "finished", "failed", "stale"] = "finished"
    config: EffectiveConfig = Field(default_factory=EffectiveConfig)
    config_diff: list[ConfigChange] = Field(default_factory=list)
    verdict: Verdict | None = None
    failure: Failure | None = None
    rows: list[LevelRow] = Field(default_factory=list)
    repeats: int = 0
    environment: Fingerprint | None = None
    analysis: str | None = None  # model-written, rendered escaped and marked
    patch_sha: str | None = None
    patch: PatchRecord | None = None  # the commit it ran from, its base and diff (server.source set)
    command: str = ""
    baseline_id: str | None = None
    node_seconds: float = 0.0
    started_at: float = 0.0
    finished_at: float | None = None
    adopted: bool = False
    adopt_if_win: bool = False  # the playbook's adoption policy for this hypothesis


class DeployView(BaseModel):
    """The configuration to deploy: the baseline plus the adopted wins, as launched."""

    command: str  # the exact (redacted) launch command, its env first
    experiment_id: str  # the measurement it was read from
    adopted: list[str] = Field(default_factory=list)  # the adopted wins it includes, in order


class WinNotAdopted(BaseModel):
    experiment_id: str
    hypothesis: str
    why: str


class BaselineView(BaseModel):
    experiment_id: str
    config: EffectiveConfig
    figures: dict[str, dict[int, float]] = Field(default_factory=dict)  # workload -> C -> metric mean
    reason: str = ""  # why it was (re)measured: start, adopted win, environment change
    measured_at: float = 0.0
    noise_pct: float | None = None
    launches: int = 0  # launches measured: the start's and a new environment's are the node's noise floor
    work: dict[str, Work] = Field(default_factory=dict)  # workload -> the work its last launch did


class ReviewView(BaseModel):
    seq: int
    reason: str
    decision: str | None = None
    note: str = ""
    decided_at: float | None = None


#: how a recorded model call ended; "failed" is the endpoint, "rejected" the answer
PlannerCallOutcome = Literal["accepted", "rejected", "failed"]
#: the prefix the planner bridge stores on a failed call's reason
CALL_FAILED = "call failed: "


class PlannerCall(BaseModel):
    """One recorded model call, as `campaign show --json` and the journal list it."""

    purpose: str
    model: str = ""
    attempt: int = 0
    prompt_hash: str = ""
    outcome: PlannerCallOutcome = "accepted"
    reason: str | None = None  # why the answer was rejected, or why the call failed
    output: str | None = None  # the validated answer (JSON text)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    created_at: float = 0.0


class CampaignView(BaseModel):
    """Everything the journal renders, read from the store in one go."""

    id: str
    name: str
    description: str = ""
    status: CampaignStatus
    halt_reason: str | None = None
    #: the failed launch that stopped the campaign (its baseline's), with its deciding lines
    halt_failure: Failure | None = None
    node: str = ""
    time_scale: float = 1.0
    headline_workload: str | None = None  # the playbook's first workload: the baseline's headline
    min_effect_pct: float = 2.0  # the playbook's bar, for verdicts recorded before they kept their own
    latency_limit: LatencyLimitView | None = None  # the playbook's, where it sets one
    baseline: BaselineView | None = None
    baseline_history: list[BaselineView] = Field(default_factory=list)
    deploy: DeployView | None = None  # the configuration to deploy now
    wins_not_adopted: list[WinNotAdopted] = Field(default_factory=list)
    experiments: list[ExperimentView] = Field(default_factory=list)
    dead_ends: list[DeadEnd] = Field(default_factory=list)
    reviews: list[ReviewView] = Field(default_factory=list)
    environment: Fingerprint | None = None
    environment_changes: list[str] = Field(default_factory=list)
    drift_notes: list[str] = Field(default_factory=list)
    planner_cost: dict[str, float] = Field(default_factory=dict)  # calls, prompt/completion tokens, seconds
    planner_calls: list[PlannerCall] = Field(default_factory=list)  # oldest first
    planner_notes: list[str] = Field(default_factory=list)  # "planner" events: gave up, unavailable
    node_seconds: float = 0.0
    created_at: float = 0.0
    updated_at: float = 0.0
    # a view of a window of the campaign (an incremental journal update): `experiments`
    # holds only some; each one's number in the whole campaign, and per environment (its
    # JSON) the first experiment that had it.  None: `experiments` is the whole campaign.
    numbers: dict[str, int] | None = None
    environment_first: dict[str, str] | None = None


class LevelSamples(BaseModel):
    """Raw repeats at one level, the verdict's input."""

    workload: str
    concurrency: int
    baseline: list[LevelResult] = Field(default_factory=list)
    candidate: list[LevelResult] = Field(default_factory=list)
