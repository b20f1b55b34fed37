"""The read records the Store hands out, and the value types of the record's columns.

Why apart from the tables (`campaign.store.models`): a read-only command (`campaign
journal`) reads through plain sqlite3 (`campaign.store.reader`) and must not import
sqlmodel and SQLAlchemy (0.5 s of a 2 s render) to build these.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from pydantic import Field as PField

from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig, Failure, LevelResult
from campaign.domain.records import CampaignStatus
from campaign.playbook.schema import HypothesisSpec, Playbook

HypothesisSource = Literal["playbook", "llm", "review", "reopened"]
HypothesisStatus = Literal["queued", "running", "done", "rejected"]
ExperimentRole = Literal["baseline", "candidate"]
ExperimentStatus = Literal["running", "finished", "failed", "stale"]
RunSide = Literal["baseline", "candidate"]
ArtifactKind = Literal[
    "log_excerpt", "command", "config_diff", "patch", "analysis", "correctness",
    "outputs", "reported_config", "failure", "node_seconds", "queue_seconds", "drift", "server_stats",
    "stop_reason", "round_reason", "work", "asked_work",
]
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


def unknown_campaign(campaign_id: str) -> UserError:
    return UserError(f"campaign {campaign_id}: no such campaign in the database (fix: run `campaign status` to list campaign ids)")
