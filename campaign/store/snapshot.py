"""Read every record of one campaign inside one read transaction (a WAL snapshot)."""

from __future__ import annotations

from collections.abc import Collection
from functools import partial
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from campaign.domain.models import Fingerprint
from campaign.domain.records import Verdict
from campaign.domain.source import PatchRecord
from campaign.store.convert import (
    campaign_record,
    experiment_record,
    hypothesis_record,
    review_record,
    verdict_detail,
    verdict_of,
)
from campaign.store.memo import ParseMemo
from campaign.store.models import (
    ArtifactRow,
    ExperimentRow,
    FingerprintRow,
    HypothesisRow,
    ReviewRow,
    RunSideRow,
    VerdictRow,
)
from campaign.store.ops import require_campaign
from campaign.store.pack import level_values, unpack_text
from campaign.store.reviews import ReviewLogMixin
from campaign.store.view import CampaignSnapshot, Runs, light_verdict

OVERVIEW_LAST = 40  # campaign.journal.format.OVERVIEW_LAST (the store does not import the journal)


def read_runs(s: Session, ids: list[str], metric: str) -> dict[str, Runs]:
    """Every level of every round of `ids`, reduced to `metric`, per side in round order."""
    runs: dict[str, Runs] = {i: Runs() for i in ids}
    q = select(RunSideRow.experiment_id, RunSideRow.side, RunSideRow.repeat, RunSideRow.levels)
    q = q.where(col(RunSideRow.experiment_id).in_(ids)).order_by(col(RunSideRow.repeat))
    for exp_id, side, repeat, blob in s.exec(q):
        runs[exp_id].add(side, repeat, level_values(blob, metric))
    return runs


def _memo_runs(s: Session, ids: list[str], metric: str, memo: ParseMemo) -> dict[str, Runs]:
    """`read_runs` through the memo: each experiment keyed by its rounds' heads (side,
    round, when recorded), read without their levels; only a new key is decoded."""
    heads: dict[str, list[tuple[str, int, float]]] = {i: [] for i in ids}
    q = select(RunSideRow.experiment_id, RunSideRow.side, RunSideRow.repeat, RunSideRow.recorded_at)
    for exp_id, side, repeat, recorded_at in s.exec(q.where(col(RunSideRow.experiment_id).in_(ids))):
        heads[exp_id].append((side, repeat, recorded_at))
    keys = {i: (i, metric, tuple(sorted(h))) for i, h in heads.items()}
    out = {i: found for i in ids if (found := memo.runs.peek(keys[i])) is not None}
    missing = [i for i in ids if i not in out]
    if missing:
        for exp_id, decoded in read_runs(s, missing, metric).items():
            out[exp_id] = memo.runs.get(keys[exp_id], lambda r=decoded: r)  # type: ignore[misc]
    return out


def read_verdicts(s: Session, ids: list[str]) -> dict[str, Verdict]:
    return {v.experiment_id: verdict_of(verdict_detail(v))
            for v in s.exec(_plain(VerdictRow).where(col(VerdictRow.experiment_id).in_(ids)))}


def _read_verdicts(s: Session, ids: list[str], full: set[str], *, parsed: set[str],
                   memo: ParseMemo) -> dict[str, Verdict]:
    """Every verdict of `ids`: in full for `full`; without per-level comparisons for
    `parsed` and the dead ends (scoreboard, overview, revisit lists), decoded once per
    Store; the rest from their columns alone (their details are not even read)."""
    head = _plain(VerdictRow, "experiment_id", "kind", "reason", "failure_class", "recorded_at")
    head = head.where(col(VerdictRow.experiment_id).in_(ids))
    verdicts: dict[str, Verdict] = {}
    decode: list[str] = []
    for exp_id, kind, reason, failure_class, recorded_at in s.exec(head):
        if exp_id not in full and (exp_id in parsed or kind == "dead_end"):
            found = memo.verdicts.peek((exp_id, recorded_at, kind))
            if found is not None:
                verdicts[exp_id] = found
                continue
        if exp_id in full or exp_id in parsed or kind == "dead_end":
            decode.append(exp_id)
        else:  # the scoreboard's marker: from the columns
            verdicts[exp_id] = memo.verdicts.get((exp_id, recorded_at, kind, reason, failure_class),
                                                 lambda: Verdict(kind=kind, reason=reason, failure_class=failure_class))
    if decode:
        for v in s.exec(_plain(VerdictRow).where(col(VerdictRow.experiment_id).in_(decode))):
            if v.experiment_id in full:
                verdicts[v.experiment_id] = verdict_of(verdict_detail(v))
            else:
                verdicts[v.experiment_id] = memo.verdicts.get((v.experiment_id, v.recorded_at, v.kind),
                                                              partial(_light, v))
    return verdicts


def _light(row: Any) -> Verdict:
    return light_verdict(verdict_detail(row))


def _plain(model: Any, *names: str) -> Any:
    """Select a table's columns as plain rows, not ORM instances: building 3,000 SQLModel
    objects took half of a journal update at 1,000 experiments, and the converters read
    the same attribute names from either (the tables read this way name every column
    after its attribute).  With `names`, just those columns."""
    table = model.__table__
    return select(*(table.columns if not names else [table.c[n] for n in names]))


def read_snapshot(s: Session, campaign_id: str, detail: set[str] | None = None, *,
                  only: Collection[str] | None = None, window: Collection[str] | None = None,
                  memo: ParseMemo | None = None) -> CampaignSnapshot:
    """Every record; with `detail`, runs and analyses only of those experiments and of the
    baselines (what an incremental journal update re-renders), verdicts of all (decoded
    only where shown: those, the latest, the dead ends), and the hypotheses of those
    experiments and of the dead ends (parsing every spec was a third of an update at
    1,000 experiments).  With `only`, just those experiments, the baselines they borrow
    and their hypotheses, and no reviews or events: what their own `show` pieces need, at
    the same cost at experiment 5,000 as at 10.  With `window`, the candidates in it and
    every baseline, with everything campaign-wide (reviews, events, the node time summed
    and each environment's first experiment in SQL): what a journal update shows, at the
    cost of the window.  `memo` reuses what the same Store has decoded before
    (`campaign.store.memo`)."""
    memo = memo or ParseMemo(limit=1)
    campaign = campaign_record(require_campaign(s, campaign_id))
    hyp_q = _plain(HypothesisRow).where(HypothesisRow.campaign_id == campaign_id)
    exp_q = _plain(ExperimentRow).where(ExperimentRow.campaign_id == campaign_id)
    if only is not None:
        chosen = s.exec(exp_q.where(col(ExperimentRow.id).in_(list(only)))).all()
        refs = {e.baseline_ref for e in chosen if e.baseline_ref} - {e.id for e in chosen}
        exp_q = exp_q.where(col(ExperimentRow.id).in_([e.id for e in chosen] + sorted(refs)))
        hyp_q = hyp_q.where(col(HypothesisRow.name).in_(sorted({e.hypothesis for e in chosen})))
    totals: dict[str, Any] | None = None
    if window is not None:
        exp_q = exp_q.where(col(ExperimentRow.id).in_(list(window)) | (col(ExperimentRow.role) == "baseline"))
        totals = _campaign_totals(s, campaign_id)
    experiments = s.exec(exp_q.order_by(col(ExperimentRow.started_at), col(ExperimentRow.id))).all()
    ids = [e.id for e in experiments]
    runs: dict[str, Runs] = {}
    loaded = ids if detail is None else [e.id for e in experiments if e.id in detail or e.role == "baseline"]
    metric = str(campaign.playbook.get("verdict", {}).get("metric", "output_tokens_per_s"))
    if detail is None:
        runs.update(read_runs(s, loaded, metric))
    else:  # a journal update: the baselines' rounds are final once written, decoded once per Store
        runs.update(read_runs(s, [i for i in loaded if i in detail], metric))
        runs.update(_memo_runs(s, [i for i in loaded if i not in detail], metric, memo))
    full = set(loaded)
    verdicts = _read_verdicts(s, ids, full, parsed=full | set(ids[-OVERVIEW_LAST:]), memo=memo)
    if detail is not None:  # what the view reads a spec for: a re-rendered section, a dead end's revisit list
        wanted = {e.hypothesis for e in experiments
                  if e.id in full or (e.id in verdicts and verdicts[e.id].kind == "dead_end")}
        hyp_q = hyp_q.where(col(HypothesisRow.name).in_(sorted(wanted)))
    hyp_rows = s.exec(hyp_q.order_by(col(HypothesisRow.position))).all()
    analyses = {
        a.experiment_id: unpack_text(a.content, a.content_z)
        for a in s.exec(
            select(ArtifactRow)
            .where(col(ArtifactRow.experiment_id).in_(loaded), ArtifactRow.kind == "analysis")
            .order_by(col(ArtifactRow.seq))
        )
    }  # the highest seq wins: a later analysis supersedes
    patches = {
        a.experiment_id: PatchRecord.model_validate_json(unpack_text(a.content, a.content_z))
        for a in s.exec(select(ArtifactRow).where(col(ArtifactRow.experiment_id).in_(ids), ArtifactRow.kind == "patch"))
    }  # the tree each experiment ran from (server.source set)
    fps = s.exec(select(FingerprintRow).where(FingerprintRow.campaign_id == campaign_id).order_by(col(FingerprintRow.seq))).all()
    reviews = s.exec(select(ReviewRow).where(ReviewRow.campaign_id == campaign_id).order_by(col(ReviewRow.seq))).all() \
        if only is None else []
    return CampaignSnapshot(
        detail=None if detail is None else full,
        campaign=campaign,
        hypotheses=[memo.hypotheses.get(tuple(h), partial(hypothesis_record, h)) for h in hyp_rows],
        experiments=[memo.experiments.get(tuple(e), partial(experiment_record, e)) for e in experiments],
        runs=runs,
        verdicts=verdicts,
        fingerprints={f.id: Fingerprint.model_validate_json(f.json_) for f in fps},
        latest_fingerprint_id=fps[-1].id if fps else None,
        analyses=analyses,
        patches=patches,
        reviews=[review_record(r) for r in reviews],
        events=ReviewLogMixin._events_in(s, campaign_id) if only is None else [],
        planner_cost=ReviewLogMixin._planner_cost_in(s, campaign_id) if only is None else {},
        planner_calls=ReviewLogMixin._planner_calls_in(s, campaign_id) if only is None else [],
        totals=totals,
    )


def _campaign_totals(s: Session, campaign_id: str) -> dict[str, Any]:
    """What a view of a window still shows of the whole campaign: the node time of every
    experiment, and the first candidate of each environment (`same as experiment N`).
    Aggregates in SQL: no row reaches Python per experiment."""
    conn = s.connection()
    node_seconds = conn.execute(text("SELECT coalesce(sum(node_seconds), 0) FROM experiments "
                                     "WHERE campaign_id = :cid"), {"cid": campaign_id}).scalar_one()
    first = conn.execute(text(
        "SELECT fingerprint_id, id, min(started_at) FROM experiments WHERE campaign_id = :cid "
        "AND role = 'candidate' AND fingerprint_id IS NOT NULL GROUP BY fingerprint_id"), {"cid": campaign_id})
    return {"node_seconds": float(node_seconds), "environment_first": {r[0]: r[1] for r in first}}


__all__ = ["read_runs", "read_snapshot", "read_verdicts"]
