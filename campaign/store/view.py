"""Pure assembly of what the journal and `campaign show --json` read.

The Store reads one consistent `CampaignSnapshot` in a single read transaction;
everything here is a pure function of it, so the view logic is tested with plain
records and never holds a database lock.
"""

from __future__ import annotations

from statistics import fmean, stdev
from typing import Any

from pydantic import BaseModel, Field

from campaign.domain.models import ConfigChange, EffectiveConfig, Fingerprint
from campaign.domain.records import (
    BaselineView,
    CampaignView,
    DeadEnd,
    ExperimentView,
    LevelRow,
    ReviewView,
    Verdict,
)
from campaign.domain.source import PatchRecord
from campaign.store.models import (
    CampaignRecord,
    EventRecord,
    ExperimentRecord,
    HypothesisRecord,
    ReviewRecord,
    RunRecord,
)

ENVIRONMENT_EVENT = "environment"
DRIFT_EVENT = "drift"


class CampaignSnapshot(BaseModel):
    """Every record of one campaign, read in one transaction."""

    campaign: CampaignRecord
    hypotheses: list[HypothesisRecord] = Field(default_factory=list)
    experiments: list[ExperimentRecord] = Field(default_factory=list)  # by started_at
    runs: dict[str, list[RunRecord]] = Field(default_factory=dict)  # experiment id -> runs
    verdicts: dict[str, Verdict] = Field(default_factory=dict)
    fingerprints: dict[str, Fingerprint] = Field(default_factory=dict)
    latest_fingerprint_id: str | None = None
    analyses: dict[str, str] = Field(default_factory=dict)  # experiment id -> analysis text
    patches: dict[str, PatchRecord] = Field(default_factory=dict)  # experiment id -> the tree it ran from
    reviews: list[ReviewRecord] = Field(default_factory=list)
    events: list[EventRecord] = Field(default_factory=list)
    planner_cost: dict[str, float] = Field(default_factory=dict)

    def metric(self) -> str:
        return str(self.campaign.playbook.get("verdict", {}).get("metric", "output_tokens_per_s"))

    def workload_order(self) -> list[str]:
        return list(self.campaign.playbook.get("workloads", {}))


def config_diff(before: EffectiveConfig, after: EffectiveConfig) -> list[ConfigChange]:
    """Flag and env changes from `before` to `after`, sorted by kind then key."""
    changes: list[ConfigChange] = []
    for kind, old, new in (("flag", before.flags, after.flags), ("env", before.env, after.env)):
        for key in sorted(set(old) | set(new)):
            if key not in new:
                changes.append(ConfigChange(kind=kind, key=key, before=old[key], change="removed"))
            elif key not in old:
                changes.append(ConfigChange(kind=kind, key=key, after=new[key], change="added"))
            elif old[key] != new[key]:
                changes.append(ConfigChange(kind=kind, key=key, before=old[key], after=new[key], change="changed"))
    return changes


def changed_components(revisit_on: list[str], then: dict[str, str], now: dict[str, str]) -> list[str]:
    """The revisit components whose value differs between two environments."""
    return [c for c in revisit_on if then.get(c, "") != now.get(c, "")]


def level_means(runs: list[RunRecord], side: str, metric: str) -> dict[tuple[str, int], list[float]]:
    out: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        if run.side == side:
            out.setdefault((run.workload, run.concurrency), []).append(float(getattr(run.result, metric)))
    return out


def _baseline_runs(snap: CampaignSnapshot, exp: ExperimentRecord) -> list[RunRecord]:
    """Interleaved baseline runs of the experiment itself, else those of its baseline."""
    own = [r for r in snap.runs.get(exp.id, []) if r.side == "baseline"]
    if own or exp.baseline_ref is None:
        return own
    ref = next((e for e in snap.experiments if e.id == exp.baseline_ref), None)
    if ref is None or ref.status == "stale":
        return []
    return [r for r in snap.runs.get(ref.id, []) if r.side == "baseline"]


def _sort_key(order: list[str]) -> Any:
    return lambda key: (order.index(key[0]) if key[0] in order else len(order), key[0], key[1])


def baseline_view(snap: CampaignSnapshot, exp: ExperimentRecord) -> BaselineView:
    samples = level_means(snap.runs.get(exp.id, []), "baseline", snap.metric())
    figures: dict[str, dict[int, float]] = {}
    noise: list[float] = []
    for wl, c in sorted(samples, key=_sort_key(snap.workload_order())):
        values = samples[(wl, c)]
        figures.setdefault(wl, {})[c] = fmean(values)
        if len(values) >= 2 and fmean(values) > 0:
            noise.append(stdev(values) / fmean(values) * 100)
    return BaselineView(
        experiment_id=exp.id,
        config=exp.config,
        figures=figures,
        reason=exp.reason,
        measured_at=exp.finished_at or exp.started_at,
        noise_pct=max(noise) if noise else None,  # largest coefficient of variation across levels
    )


def experiment_view(snap: CampaignSnapshot, exp: ExperimentRecord) -> ExperimentView:
    metric = snap.metric()
    verdict = snap.verdicts.get(exp.id)
    cand = level_means(snap.runs.get(exp.id, []), "candidate", metric)
    base = level_means(_baseline_runs(snap, exp), "baseline", metric)
    comparisons = {(lc.workload, lc.concurrency): lc for lc in (verdict.levels if verdict else [])}
    rows = [
        LevelRow(
            workload=wl,
            concurrency=c,
            baseline=fmean(base[(wl, c)]) if (wl, c) in base else None,
            candidate=fmean(cand[(wl, c)]) if (wl, c) in cand else None,
            comparison=comparisons.get((wl, c)),
        )
        for wl, c in sorted(set(cand) | set(comparisons), key=_sort_key(snap.workload_order()))  # levels it reached
    ]
    hyp = next((h for h in snap.hypotheses if h.name == exp.hypothesis), None)
    ref = next((e for e in snap.experiments if e.id == exp.baseline_ref), None)
    repeats = {r.repeat for r in snap.runs.get(exp.id, []) if r.side == "candidate"}
    return ExperimentView(
        id=exp.id,
        hypothesis=exp.hypothesis,
        attempt=exp.attempt,
        rationale=hyp.spec.rationale if hyp else "",
        source=hyp.source if hyp else "playbook",
        node=exp.node,
        status=exp.status,
        config=exp.config,
        config_diff=config_diff(ref.config, exp.config) if ref else [],
        verdict=verdict,
        failure=exp.failure,
        rows=rows,
        repeats=len(repeats),
        environment=snap.fingerprints.get(exp.fingerprint_id or ""),
        analysis=snap.analyses.get(exp.id),
        patch_sha=exp.patch_sha,
        patch=snap.patches.get(exp.id),
        command=exp.command,
        baseline_id=exp.baseline_ref,
        node_seconds=exp.node_seconds,
        started_at=exp.started_at,
        finished_at=exp.finished_at,
        adopted=exp.adopted,
    )


def dead_ends(snap: CampaignSnapshot) -> list[DeadEnd]:
    """Dead-end verdicts, each marked reopened when the environment moved on a revisit component."""
    latest = snap.fingerprints.get(snap.latest_fingerprint_id or "")
    now = latest.components() if latest else {}
    specs = {h.name: h.spec for h in snap.hypotheses}
    out: list[DeadEnd] = []
    for exp in snap.experiments:
        verdict = snap.verdicts.get(exp.id)
        if verdict is None or verdict.kind != "dead_end" or exp.role != "candidate":
            continue
        spec = specs.get(exp.hypothesis)
        revisit = verdict.revisit_on or (spec.revisit_on if spec else [])
        then_fp = snap.fingerprints.get(exp.fingerprint_id or "")
        then = then_fp.components() if then_fp else {}
        out.append(
            DeadEnd(
                hypothesis=exp.hypothesis,
                experiment_id=exp.id,
                reason=verdict.reason,
                failure_class=verdict.failure_class,
                revisit_on=list(revisit),
                environment={k: v for k, v in then.items() if v},
                reopened=bool(then_fp and latest and changed_components(revisit, then, now)),
            )
        )
    return out


def build_view(snap: CampaignSnapshot) -> CampaignView:
    c = snap.campaign
    baselines = [e for e in snap.experiments if e.role == "baseline" and e.status == "finished"]
    current = next((e for e in baselines if e.id == c.baseline_experiment_id), baselines[-1] if baselines else None)
    history = [baseline_view(snap, e) for e in baselines]
    return CampaignView(
        id=c.id,
        name=c.name,
        description=c.description,
        status=c.status,
        halt_reason=c.halt_reason,
        node=c.node,
        time_scale=c.time_scale,
        baseline=next((b for b in history if current and b.experiment_id == current.id), None),
        baseline_history=history,
        experiments=[experiment_view(snap, e) for e in snap.experiments if e.role == "candidate"],
        dead_ends=dead_ends(snap),
        reviews=[
            ReviewView(seq=r.seq, reason=r.reason, decision=r.decision, note=r.note, decided_at=r.decided_at)
            for r in snap.reviews
        ],
        environment=snap.fingerprints.get(snap.latest_fingerprint_id or ""),
        environment_changes=[e.message for e in snap.events if e.kind == ENVIRONMENT_EVENT],
        drift_notes=[e.message for e in snap.events if e.kind == DRIFT_EVENT],
        planner_cost=snap.planner_cost,
        node_seconds=sum(e.node_seconds for e in snap.experiments),
        created_at=c.created_at,
        updated_at=c.updated_at,
    )


def show_json(view: CampaignView) -> dict[str, Any]:
    """The `campaign show --json` document (concurrency keys are strings, as in JSON)."""
    base = view.baseline
    return {
        "id": view.id,
        "name": view.name,
        "status": view.status,
        "halt_reason": view.halt_reason,
        "baseline": None
        if base is None
        else {
            "experiment_id": base.experiment_id,
            "config": base.config.model_dump(mode="json"),
            "figures": {wl: {str(c): v for c, v in levels.items()} for wl, levels in base.figures.items()},
        },
        "experiments": [_experiment_json(e) for e in view.experiments],
    }


def _experiment_json(e: ExperimentView) -> dict[str, Any]:
    metrics: dict[str, dict[str, dict[str, float | None]]] = {}
    for row in e.rows:
        delta = row.comparison.delta_pct if row.comparison else None
        if delta is None and row.candidate is not None and row.baseline:
            delta = (row.candidate / row.baseline - 1) * 100
        metrics.setdefault(row.workload, {})[str(row.concurrency)] = {
            "candidate": row.candidate,
            "baseline": row.baseline,
            "delta_pct": delta,
        }
    v = e.verdict
    return {
        "id": e.id,
        "hypothesis": e.hypothesis,
        "verdict": v.kind if v else None,
        "reason": v.reason if v else (e.failure.summary if e.failure else ""),
        "failure_class": (v.failure_class.value if v and v.failure_class else None)
        or (e.failure.failure_class.value if e.failure else None),
        "metrics": metrics,
        "attempt": e.attempt,
        "node": e.node,
        "status": e.status,
        "adopted": e.adopted,
        "patch_sha": e.patch_sha,
        "patch": {"sha": e.patch.sha, "base": e.patch.base, "files": e.patch.files, "branch": e.patch.branch,
                  "patch_sha256": e.patch.patch_sha256} if e.patch is not None else None,
        "node_seconds": e.node_seconds,
    }


__all__ = ["CampaignSnapshot", "build_view", "config_diff", "dead_ends", "show_json"]
