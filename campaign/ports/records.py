"""The records the store port hands out and takes, and the value types of their fields.

Part of the port (`campaign.ports.store`), not of the SQLite store: the loop, the
journal and the verdict type against these, and any store implementation returns them.
No sqlmodel here: a read-only command (`campaign journal`) builds them from plain
sqlite3 (`campaign.store.reader`) without importing SQLAlchemy (0.5 s of a 2 s render).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, field_validator
from pydantic import Field as PField

from campaign.domain.models import EffectiveConfig, Failure, LevelResult
from campaign.domain.records import CampaignStatus
from campaign.playbook.schema import HypothesisSpec, Playbook

HypothesisSource = Literal["playbook", "llm", "review", "reopened"]
HypothesisStatus = Literal["queued", "running", "done", "rejected"]
ExperimentRole = Literal["baseline", "candidate"]
ExperimentStatus = Literal["running", "finished", "failed", "stale"]
RunSide = Literal["baseline", "candidate"]
#: what one launch (one side of one repeat) leaves behind, as text (`LaunchArtifact`)
LaunchArtifactKind = Literal["log_excerpt", "command", "outputs", "reported_config", "failure", "server_stats", "work"]
#: one launch's times, numbers (`LaunchTime`)
LaunchTimeKind = Literal["node_seconds", "queue_seconds"]
#: what an experiment records once, or per round (`round_reason`) or repeat (`drift`)
ExperimentArtifactKind = Literal[
    "config_diff",
    "patch",
    "analysis",
    "correctness",
    "drift",
    "stop_reason",
    "round_reason",
    "asked_work",
]
ArtifactKind = Literal[LaunchArtifactKind, LaunchTimeKind, ExperimentArtifactKind]
ReviewDecision = Literal["approve", "reject"]
BASELINE_HYPOTHESIS = "baseline"  # the `hypothesis` of every baseline measurement


# ---------------------------------------------------------------------- read records
class CampaignRecord(BaseModel):
    id: str
    name: str
    playbook_path: str
    playbook: dict[str, Any]
    overrides: dict[str, Any]
    status: CampaignStatus
    halt_reason: str | None
    baseline_experiment_id: str | None
    description: str
    node: str
    time_scale: float
    created_at: float
    updated_at: float

    def playbook_model(self) -> Playbook:
        return Playbook.model_validate(self.playbook)


class HypothesisRecord(BaseModel):
    campaign_id: str
    name: str
    source: HypothesisSource
    spec: HypothesisSpec
    status: HypothesisStatus
    position: int
    reopen_count: int
    rejection_reason: str | None


class ExperimentRecord(BaseModel):
    id: str
    campaign_id: str
    hypothesis: str
    attempt: int
    role: ExperimentRole
    node: str
    config: EffectiveConfig
    command: str
    fingerprint_id: str | None
    status: ExperimentStatus
    patch_sha: str | None
    failure: Failure | None
    baseline_ref: str | None
    reason: str
    started_at: float
    finished_at: float | None
    node_seconds: float
    queue_seconds: float = 0.0  # waiting for an allocation (a Slurm queue): not node time
    adopted: bool


class RunRecord(BaseModel):
    experiment_id: str
    side: RunSide
    repeat: int
    workload: str
    concurrency: int
    result: LevelResult
    work: str  # `campaign.domain.work.Work.key` ("" or a bare prompt-set hash in records written before it)
    node: str
    recorded_at: float


class ReviewRecord(BaseModel):
    campaign_id: str
    seq: int
    key: str
    reason: str
    requested_at: float
    decision: ReviewDecision | None
    note: str
    added_hypotheses: list[HypothesisSpec] = PField(default_factory=list)
    overrides: dict[str, Any] = PField(default_factory=dict)
    decided_at: float | None


class EventRecord(BaseModel):
    ts: float
    kind: str
    message: str


class Tally(BaseModel):
    """What `record` decides with: candidates recorded (the budget), ideas since the last
    win and dead ends among them (both since the last approved review gate or environment
    change), and the node and scheduler-queue seconds of every finished experiment."""

    experiments_done: int = 0
    no_win: int = 0
    dead_end: int = 0
    node_seconds: float = 0.0
    queue_seconds: float = 0.0

    @field_validator("node_seconds", "queue_seconds")
    @classmethod
    def _microseconds(cls, v: float) -> float:
        """Kept to the microsecond: a sum kept step by step and one summed by the database
        in another order differ in the last bit, not in any second that is shown."""
        return round(v, 6)


class LaunchArtifact(BaseModel):
    """One piece of what a launch left behind: its command, log excerpt, outputs..."""

    kind: LaunchArtifactKind
    side: RunSide
    repeat: int
    content: str


class LaunchTime(BaseModel):
    """What one launch cost: node seconds (the budget's unit) and the time it waited
    for an allocation (a Slurm queue), kept apart."""

    side: RunSide
    repeat: int
    node_seconds: float
    queue_seconds: float = 0.0
