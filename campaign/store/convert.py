"""Row -> record conversion and the canonical JSON the store compares and hashes.

Immutability checks compare canonical JSON (sorted keys), so a record written twice
with the same content is recognised as the same record whatever the key order.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from campaign.domain.models import EffectiveConfig, Failure, Fingerprint
from campaign.domain.records import Verdict
from campaign.playbook.schema import HypothesisSpec
from campaign.store.pack import unpack_levels, unpack_text
from campaign.store.records import (
    CampaignRecord,
    EventRecord,
    ExperimentRecord,
    HypothesisRecord,
    ReviewRecord,
    RunRecord,
    RunSide,
)

if TYPE_CHECKING:  # rows of either kind: ORM rows, or plain ones with the same attribute names
    from campaign.store.models import (
        CampaignRow,
        EventRow,
        ExperimentRow,
        HypothesisRow,
        ReviewRow,
        RunSideRow,
        VerdictRow,
    )


def canonical(value: BaseModel | dict[str, Any] | list[Any] | None) -> str:
    """Stable JSON text: equal content gives equal text."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def fingerprint_id(fp: Fingerprint) -> str:
    """Content hash: the same environment always gets the same id."""
    return hashlib.sha256(canonical(fp).encode()).hexdigest()[:16]


def campaign_record(row: CampaignRow) -> CampaignRecord:
    return CampaignRecord(
        id=row.id,
        name=row.name,
        playbook_path=row.playbook_path,
        playbook=json.loads(row.playbook_json or "{}"),
        overrides=json.loads(row.overrides_json or "{}"),
        status=row.status,
        halt_reason=row.halt_reason,
        baseline_experiment_id=row.baseline_experiment_id,
        description=row.description,
        node=row.node,
        time_scale=row.time_scale,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def hypothesis_record(row: HypothesisRow) -> HypothesisRecord:
    return HypothesisRecord(
        campaign_id=row.campaign_id,
        name=row.name,
        source=row.source,
        spec=HypothesisSpec.model_validate_json(row.spec_json),
        status=row.status,
        position=row.position,
        reopen_count=row.reopen_count,
        rejection_reason=row.rejection_reason,
    )


def experiment_record(row: ExperimentRow) -> ExperimentRecord:
    return ExperimentRecord(
        id=row.id,
        campaign_id=row.campaign_id,
        hypothesis=row.hypothesis,
        attempt=row.attempt,
        role=row.role,
        node=row.node,
        config=EffectiveConfig.model_validate_json(row.config_json),
        command=row.command,
        fingerprint_id=row.fingerprint_id,
        status=row.status,
        patch_sha=row.patch_sha,
        failure=Failure.model_validate_json(row.failure_json) if row.failure_json else None,
        baseline_ref=row.baseline_ref,
        reason=row.reason,
        started_at=row.started_at,
        finished_at=row.finished_at,
        node_seconds=row.node_seconds,
        queue_seconds=row.queue_seconds,
        adopted=row.adopted,
    )


def run_records(row: RunSideRow) -> list[RunRecord]:
    """The levels of one packed side/round, as one record per level."""
    return [
        RunRecord(
            experiment_id=row.experiment_id,
            side=row.side,
            repeat=row.repeat,
            workload=workload,
            concurrency=result.concurrency,
            result=result,
            work=work,
            node=row.node,
            recorded_at=row.recorded_at,
        )
        for workload, result, work in unpack_levels(row.levels)
    ]


def run_order(r: RunRecord) -> tuple[str, int, str, int]:
    """The order runs are handed out in: workload, concurrency, side, repeat."""
    return (r.workload, r.concurrency, r.side, r.repeat)


def review_record(row: ReviewRow) -> ReviewRecord:
    return ReviewRecord(
        campaign_id=row.campaign_id,
        seq=row.seq,
        key=row.key,
        reason=row.reason,
        requested_at=row.requested_at,
        decision=row.decision,
        note=row.note,
        added_hypotheses=[HypothesisSpec.model_validate(h) for h in json.loads(row.added_hypotheses_json)],
        overrides=json.loads(row.overrides_json or "{}"),
        decided_at=row.decided_at,
    )


def event_record(row: EventRow) -> EventRecord:
    return EventRecord(ts=row.ts, kind=row.kind, message=row.message)


def verdict_of(detail_json: str) -> Verdict:
    return Verdict.model_validate_json(detail_json)


def verdict_detail(row: VerdictRow) -> str:
    """The verdict's canonical JSON, plain or compressed."""
    return unpack_text(row.detail_json, row.detail_z)


# a launch's artifacts share one row key per kind: seq = 2 * repeat + side (baseline 0,
# candidate 1); these two are the only places that know it
def launch_seq(side: RunSide, repeat: int) -> int:
    return 2 * repeat + (0 if side == "baseline" else 1)


def launch_key(seq: int) -> tuple[RunSide, int]:
    """(side, repeat) of a launch artifact's seq."""
    return ("baseline" if seq % 2 == 0 else "candidate"), seq // 2


def seconds_text(seconds: float) -> str:
    """How a launch's times are stored (as text artifacts: milliseconds are enough)."""
    return f"{seconds:.3f}"
