"""Read every record of one campaign inside one read transaction (a WAL snapshot)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from campaign.domain.models import Fingerprint
from campaign.domain.source import PatchRecord
from campaign.store.convert import (
    campaign_record,
    experiment_record,
    hypothesis_record,
    review_record,
    run_record,
    verdict_of,
)
from campaign.store.models import (
    ArtifactRow,
    ExperimentRow,
    FingerprintRow,
    HypothesisRow,
    ReviewRow,
    RunRecord,
    RunRow,
    VerdictRow,
)
from campaign.store.ops import require_campaign
from campaign.store.reviews import ReviewLogMixin
from campaign.store.view import CampaignSnapshot


def read_snapshot(s: Session, campaign_id: str) -> CampaignSnapshot:
    campaign = campaign_record(require_campaign(s, campaign_id))
    hypotheses = s.exec(
        select(HypothesisRow).where(HypothesisRow.campaign_id == campaign_id).order_by(col(HypothesisRow.position))
    ).all()
    experiments = s.exec(
        select(ExperimentRow)
        .where(ExperimentRow.campaign_id == campaign_id)
        .order_by(col(ExperimentRow.started_at), col(ExperimentRow.id))
    ).all()
    ids = [e.id for e in experiments]
    runs: dict[str, list[RunRecord]] = {i: [] for i in ids}
    run_rows = s.exec(
        select(RunRow)
        .where(col(RunRow.experiment_id).in_(ids))
        .order_by(col(RunRow.workload), col(RunRow.concurrency), col(RunRow.side), col(RunRow.repeat))
    )
    for r in run_rows:
        runs[r.experiment_id].append(run_record(r))
    verdicts = {v.experiment_id: verdict_of(v.detail_json) for v in s.exec(select(VerdictRow).where(col(VerdictRow.experiment_id).in_(ids)))}
    analyses = {
        a.experiment_id: a.content
        for a in s.exec(
            select(ArtifactRow)
            .where(col(ArtifactRow.experiment_id).in_(ids), ArtifactRow.kind == "analysis")
            .order_by(col(ArtifactRow.seq))
        )
    }  # the highest seq wins: a later analysis supersedes
    patches = {
        a.experiment_id: PatchRecord.model_validate_json(a.content)
        for a in s.exec(select(ArtifactRow).where(col(ArtifactRow.experiment_id).in_(ids), ArtifactRow.kind == "patch"))
    }  # the tree each experiment ran from (server.source set)
    fps = s.exec(select(FingerprintRow).where(FingerprintRow.campaign_id == campaign_id).order_by(col(FingerprintRow.seq))).all()
    reviews = s.exec(select(ReviewRow).where(ReviewRow.campaign_id == campaign_id).order_by(col(ReviewRow.seq))).all()
    return CampaignSnapshot(
        campaign=campaign,
        hypotheses=[hypothesis_record(h) for h in hypotheses],
        experiments=[experiment_record(e) for e in experiments],
        runs=runs,
        verdicts=verdicts,
        fingerprints={f.id: Fingerprint.model_validate_json(f.json_) for f in fps},
        latest_fingerprint_id=fps[-1].id if fps else None,
        analyses=analyses,
        patches=patches,
        reviews=[review_record(r) for r in reviews],
        events=ReviewLogMixin._events_in(s, campaign_id),
        planner_cost=ReviewLogMixin._planner_cost_in(s, campaign_id),
    )


__all__ = ["read_snapshot"]
