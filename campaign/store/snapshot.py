"""Read every record of one campaign inside one read transaction (a WAL snapshot)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from campaign.store.convert import (
    campaign_record,
    experiment_record,
    hypothesis_record,
    review_record,
    run_order,
    run_records,
    verdict_detail,
    verdict_of,
)
from campaign.store.models import (
    ArtifactRow,
    ExperimentRow,
    FingerprintRow,
    HypothesisRow,
    ReviewRow,
    RunRecord,
    RunSideRow,
    VerdictRow,
)
from campaign.store.ops import require_campaign
from campaign.store.pack import unpack_text
from campaign.store.reviews import ReviewLogMixin
from campaign.store.view import CampaignSnapshot
from campaign.domain.models import Fingerprint


def read_snapshot(s: Session, campaign_id: str, detail: set[str] | None = None) -> CampaignSnapshot:
    """Every record; with `detail`, runs and analyses only of those experiments and of the
    baselines (what an incremental journal update re-renders), verdicts of all."""
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
    loaded = ids if detail is None else [e.id for e in experiments if e.id in detail or e.role == "baseline"]
    for row in s.exec(select(RunSideRow).where(col(RunSideRow.experiment_id).in_(loaded))):
        runs[row.experiment_id].extend(run_records(row))
    for exp_runs in runs.values():
        exp_runs.sort(key=run_order)
    verdicts = {v.experiment_id: verdict_of(verdict_detail(v)) for v in s.exec(select(VerdictRow).where(col(VerdictRow.experiment_id).in_(ids)))}
    analyses = {
        a.experiment_id: unpack_text(a.content, a.content_z)
        for a in s.exec(
            select(ArtifactRow)
            .where(col(ArtifactRow.experiment_id).in_(loaded), ArtifactRow.kind == "analysis")
            .order_by(col(ArtifactRow.seq))
        )
    }  # the highest seq wins: a later analysis supersedes
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
        reviews=[review_record(r) for r in reviews],
        events=ReviewLogMixin._events_in(s, campaign_id),
        planner_cost=ReviewLogMixin._planner_cost_in(s, campaign_id),
    )


__all__ = ["read_snapshot"]
