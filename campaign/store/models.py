"""The campaign record's tables (sqlmodel).

Rows never leave the store: callers get the pydantic `*Record` models
(`campaign.store.records`), so a detached ORM object can never lazily
hit the database from another thread.  JSON columns hold `model_dump(mode="json")` of
the shared boundary models.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Index, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

#: bump when a table changes; an older database is migrated on open (campaign.store.migrate),
#: one with another version is refused.  2: runs packed per side and round, long text compressed.
SCHEMA_VERSION = 4


def _text() -> Any:
    return Field(default="", sa_column=Column(Text, nullable=False))


# ----------------------------------------------------------------------------- tables
class MetaRow(SQLModel, table=True):
    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: str


class CampaignRow(SQLModel, table=True):
    __tablename__ = "campaigns"
    id: str = Field(primary_key=True)
    name: str = Field(index=True)
    playbook_path: str = ""
    playbook_json: str = _text()
    overrides_json: str = "{}"
    status: str = "running"
    halt_reason: str | None = None
    baseline_experiment_id: str | None = None
    description: str = ""
    node: str = ""
    time_scale: float = 1.0
    created_at: float
    updated_at: float


class HypothesisRow(SQLModel, table=True):
    __tablename__ = "hypotheses"
    __table_args__ = (Index("ix_hypotheses_queue", "campaign_id", "status", "position"),)
    campaign_id: str = Field(primary_key=True, foreign_key="campaigns.id")
    name: str = Field(primary_key=True)
    source: str = "playbook"
    spec_json: str = _text()
    status: str = "queued"
    position: int = 0
    reopen_count: int = 0
    rejection_reason: str | None = None
    created_at: float
    updated_at: float


class ExperimentRow(SQLModel, table=True):
    __tablename__ = "experiments"
    __table_args__ = (
        UniqueConstraint("campaign_id", "hypothesis", "attempt"),
        Index("ix_experiments_order", "campaign_id", "started_at", "id"),  # snapshot, list_experiments
        Index("ix_experiments_status", "campaign_id", "status"),  # mark_stale_experiments
    )
    id: str = Field(primary_key=True)
    campaign_id: str = Field(foreign_key="campaigns.id")
    hypothesis: str
    attempt: int = 1
    role: str = "candidate"
    node: str = ""
    config_json: str = "{}"
    command: str = _text()
    fingerprint_id: str | None = None
    status: str = "running"
    patch_sha: str | None = None
    failure_json: str | None = None
    baseline_ref: str | None = None
    reason: str = ""
    started_at: float
    finished_at: float | None = None
    node_seconds: float = 0.0
    queue_seconds: float = 0.0  # summed from its launches when it became final, like node_seconds
    adopted: bool = False


class RunSideRow(SQLModel, table=True):
    """Every level of one side of one round, packed (campaign.store.pack): written in
    one transaction, read as a whole."""

    __tablename__ = "run_sides"
    experiment_id: str = Field(primary_key=True, foreign_key="experiments.id")
    side: str = Field(primary_key=True)
    repeat: int = Field(primary_key=True)
    levels: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    node: str = ""
    recorded_at: float


class VerdictRow(SQLModel, table=True):
    __tablename__ = "verdicts"
    experiment_id: str = Field(primary_key=True, foreign_key="experiments.id")
    kind: str
    reason: str = ""
    failure_class: str | None = None
    detail_json: str = _text()  # plain when short, else "" and compressed in detail_z
    detail_z: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    recorded_at: float


class FingerprintRow(SQLModel, table=True):
    __tablename__ = "fingerprints"
    campaign_id: str = Field(primary_key=True, foreign_key="campaigns.id")
    id: str = Field(primary_key=True)  # content hash
    json_: str = Field(default="{}", sa_column=Column("json", Text, nullable=False))
    seq: int = 0  # order in which this environment was last (re)entered
    recorded_at: float


class ArtifactRow(SQLModel, table=True):
    __tablename__ = "artifacts"
    __table_args__ = {"sqlite_with_rowid": False}  # the key is the row: no second copy in an index
    experiment_id: str = Field(primary_key=True, foreign_key="experiments.id")
    kind: str = Field(primary_key=True)
    seq: int = Field(default=0, primary_key=True)
    content: str = _text()  # plain when short, else "" and compressed in content_z
    content_z: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    created_at: float


class ReviewRow(SQLModel, table=True):
    __tablename__ = "reviews"
    __table_args__ = (UniqueConstraint("campaign_id", "key"),)
    campaign_id: str = Field(primary_key=True, foreign_key="campaigns.id")
    seq: int = Field(primary_key=True)
    key: str = ""  # what makes a gate the same gate when a resumed node asks again
    reason: str = ""
    requested_at: float
    decision: str | None = None
    note: str = ""
    added_hypotheses_json: str = "[]"
    overrides_json: str = "{}"
    decided_at: float | None = None


class LlmCallRow(SQLModel, table=True):
    __tablename__ = "llm_calls"
    __table_args__ = (UniqueConstraint("campaign_id", "purpose", "prompt_hash", "attempt"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign_id: str = Field(index=True, foreign_key="campaigns.id")
    purpose: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    prompt_hash: str = ""
    attempt: int = 0
    output_json: str | None = None
    rejection: str | None = None
    created_at: float


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("campaign_id", "kind", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign_id: str = Field(index=True, foreign_key="campaigns.id")
    ts: float
    kind: str
    message: str = _text()
    key: str = ""


class RunLockRow(SQLModel, table=True):
    __tablename__ = "run_locks"
    campaign_id: str = Field(primary_key=True)
    owner: str
    pid: int
    host: str
    pid_started: str = ""  # /proc start time: a recycled pid is not the holder
    acquired_at: float


TABLES = [
    MetaRow, CampaignRow, HypothesisRow, ExperimentRow, RunSideRow, VerdictRow,
    FingerprintRow, ArtifactRow, ReviewRow, LlmCallRow, EventRow, RunLockRow,
]  # fmt: skip
