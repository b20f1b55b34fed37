"""Pure assembly of what the journal and `campaign show --json` read.

The Store reads one consistent `CampaignSnapshot` in a single read transaction;
everything here is a pure function of it, so the view logic is tested with plain
records and never holds a database lock.
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Any

from pydantic import BaseModel, Field

from campaign.domain.models import ConfigChange, EffectiveConfig, Failure, Fingerprint
from campaign.domain.records import (
    BaselineView,
    CampaignView,
    DeadEnd,
    DeployView,
    ExperimentView,
    LevelComparison,
    LevelRow,
    PlannerCall,
    ReviewView,
    Verdict,
    WinNotAdopted,
)
from campaign.domain.source import PatchRecord
from campaign.domain.work import Work
from campaign.playbook.schema import VerdictSpec
from campaign.store.latency import latency_fields, latency_limit, latency_means
from campaign.store.records import (
    CampaignRecord,
    EventRecord,
    ExperimentRecord,
    HypothesisRecord,
    ReviewRecord,
)
from campaign.verdict import explain
from campaign.verdict.stats import stdev


class Runs:
    """One experiment's rounds, reduced to the campaign's verdict metric: per side, each
    level's values in round order, and the rounds measured.  What the views read: a
    1,000-experiment view never builds 100,000 level results (nor a tuple per level)."""

    __slots__ = ("latency", "levels", "repeats")

    def __init__(self) -> None:
        self.levels: dict[str, dict[tuple[str, int], list[float]]] = {"candidate": {}, "baseline": {}}
        self.repeats: dict[str, set[int]] = {"candidate": set(), "baseline": set()}
        # side -> level -> latency field ("ttft_ms.p99") -> its value per round
        self.latency: dict[str, dict[tuple[str, int], dict[str, list[float]]]] = {}

    def add(self, side: str, repeat: int, values: list[tuple[str, int, float]]) -> None:
        """One side's round (rounds must be added in order)."""
        levels = self.levels.setdefault(side, {})
        self.repeats.setdefault(side, set()).add(repeat)
        for w, c, v in values:
            levels.setdefault((w, c), []).append(v)

    def add_latency(self, side: str, fields: tuple[str, ...], rows: list[tuple[str, int, list[float]]]) -> None:
        """One side's round of latency figures, `fields` in the order of each row's values."""
        levels = self.latency.setdefault(side, {})
        for w, c, values in rows:
            level = levels.setdefault((w, c), {})
            for field, v in zip(fields, values):
                level.setdefault(field, []).append(v)

    def side(self, side: str) -> dict[tuple[str, int], list[float]]:
        return self.levels.get(side, {})

    def side_latency(self, side: str, key: tuple[str, int]) -> dict[str, list[float]]:
        return self.latency.get(side, {}).get(key, {})


NO_RUNS = Runs()


def light_verdict(detail_json: str) -> Verdict:
    """A verdict without its per-level comparisons: for experiments whose sections are not
    re-rendered (scoreboard marker, dead ends and the overview read only the rest)."""
    data = json.loads(detail_json)
    data["levels"] = []
    return Verdict.model_validate(data)


ENVIRONMENT_EVENT = "environment"
DRIFT_EVENT = "drift"
PLANNER_EVENT = "planner"


class CampaignSnapshot(BaseModel):
    """Every record of one campaign, read in one transaction."""

    campaign: CampaignRecord
    hypotheses: list[HypothesisRecord] = Field(default_factory=list)
    experiments: list[ExperimentRecord] = Field(default_factory=list)  # by started_at
    runs: Any = Field(default_factory=dict)  # experiment id -> Runs (not re-validated: 100,000 levels)
    detail: set[str] | None = None  # experiments read in full (None: all); the others carry no runs
    verdicts: dict[str, Verdict] = Field(default_factory=dict)
    fingerprints: dict[str, Fingerprint] = Field(default_factory=dict)
    latest_fingerprint_id: str | None = None
    analyses: dict[str, str] = Field(default_factory=dict)  # experiment id -> analysis text
    work: dict[str, str] = Field(default_factory=dict)  # baseline experiment id -> its last launch's work (JSON)
    patches: dict[str, PatchRecord] = Field(default_factory=dict)  # experiment id -> the tree it ran from
    reviews: list[ReviewRecord] = Field(default_factory=list)
    events: list[EventRecord] = Field(default_factory=list)
    planner_cost: dict[str, float] = Field(default_factory=dict)
    planner_calls: list[PlannerCall] = Field(default_factory=list)
    totals: dict[str, Any] | None = None  # a window's view: campaign-wide figures from SQL
    node_seconds: float = 0.0  # the whole campaign's, from its running tally (campaign.store.tally)
    deploy: DeployView | None = None  # campaign-wide, read in SQL (`campaign.store.deploy`)
    wins_not_adopted: list[WinNotAdopted] = Field(default_factory=list)

    def metric(self) -> str:
        return str(self.campaign.playbook.get("verdict", {}).get("metric", "output_tokens_per_s"))

    def min_effect_pct(self) -> float:
        default = VerdictSpec.model_fields["min_effect_pct"].default
        return float(self.campaign.playbook.get("verdict", {}).get("min_effect_pct", default))

    def latency_fields(self) -> tuple[str, ...]:
        return latency_fields(self.campaign.playbook)

    def workload_order(self) -> list[str]:
        return list(self.campaign.playbook.get("workloads", {}))

    def experiment(self, experiment_id: str | None) -> ExperimentRecord | None:
        """By id, in O(1): a view of 1,000+ experiments must not search the list per row."""
        if "_by_id" not in self.__dict__:
            self.__dict__["_by_id"] = {e.id: e for e in self.experiments}
        found: ExperimentRecord | None = self.__dict__["_by_id"].get(experiment_id or "")
        return found

    def hypothesis(self, name: str) -> HypothesisRecord | None:
        if "_hyp_by_name" not in self.__dict__:
            self.__dict__["_hyp_by_name"] = {h.name: h for h in self.hypotheses}
        found: HypothesisRecord | None = self.__dict__["_hyp_by_name"].get(name)
        return found


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


def _runs(snap: CampaignSnapshot, experiment_id: str) -> Runs:
    found: Runs = snap.runs.get(experiment_id) or NO_RUNS
    return found


def _baseline_runs(snap: CampaignSnapshot, exp: ExperimentRecord) -> Runs:
    """Interleaved baseline runs of the experiment itself, else those of its baseline."""
    own = _runs(snap, exp.id)
    if own.side("baseline") or exp.baseline_ref is None:
        return own
    ref = snap.experiment(exp.baseline_ref)
    if ref is None or ref.status == "stale":
        return NO_RUNS
    return _runs(snap, ref.id)


def _sort_key(order: list[str]) -> Any:
    return lambda key: (order.index(key[0]) if key[0] in order else len(order), key[0], key[1])


def baseline_view(snap: CampaignSnapshot, exp: ExperimentRecord) -> BaselineView:
    samples = _runs(snap, exp.id).side("baseline")
    figures: dict[str, dict[int, float]] = {}
    noise: list[float] = []
    launches = 0
    for wl, c in sorted(samples, key=_sort_key(snap.workload_order())):
        values = samples[(wl, c)]
        launches = max(launches, len(values))
        figures.setdefault(wl, {})[c] = fmean(values)
        if len(values) >= 2 and fmean(values) > 0:
            noise.append(stdev(values) / fmean(values) * 100)  # floats: statistics.stdev is exact, slow
    return BaselineView(
        experiment_id=exp.id,
        config=exp.config,
        figures=figures,
        reason=exp.reason,
        measured_at=exp.finished_at or exp.started_at,
        noise_pct=max(noise) if noise else None,  # largest coefficient of variation across levels
        launches=launches,
        work={w: Work.model_validate(v) for w, v in json.loads(snap.work[exp.id]).items()}
        if exp.id in snap.work
        else {},
    )


def _baseline_view(snap: CampaignSnapshot, exp: ExperimentRecord, memo: Any) -> BaselineView:
    if memo is None:
        return baseline_view(snap, exp)
    runs = _runs(snap, exp.id)
    key = (exp.id, id(exp), id(runs), tuple(snap.workload_order()))
    found = memo.peek(key)
    if found is not None and found[0] is exp and found[1] is runs:
        view: BaselineView = found[2]
        return view
    return memo.get(key, lambda: (exp, runs, baseline_view(snap, exp)))[2]  # type: ignore[no-any-return]


def _level_row(wl: str, c: int, base_runs: Runs, cand_runs: Runs, comparison: LevelComparison | None) -> LevelRow:
    """A compared level shows the figures its comparison used (a stalled launch the screen
    left out is not in them: `campaign.verdict.launches`); a level measured but not
    compared (a crash mid-sweep) shows its launches' mean.  Latency: every launch's mean."""
    latency = latency_means(
        {
            "candidate": cand_runs.side_latency("candidate", (wl, c)),
            "baseline": base_runs.side_latency("baseline", (wl, c)),
        }
    )
    if comparison is not None:
        return LevelRow(
            workload=wl,
            concurrency=c,
            baseline=comparison.baseline_mean,
            candidate=comparison.candidate_mean,
            comparison=comparison,
            latency=latency,
        )
    base, cand = base_runs.side("baseline"), cand_runs.side("candidate")
    return LevelRow(
        workload=wl,
        concurrency=c,
        baseline=fmean(base[(wl, c)]) if (wl, c) in base else None,
        candidate=fmean(cand[(wl, c)]) if (wl, c) in cand else None,
        latency=latency,
    )


def experiment_view(snap: CampaignSnapshot, exp: ExperimentRecord) -> ExperimentView:
    if snap.detail is not None and exp.id not in snap.detail:
        return _outline_view(snap, exp)
    verdict = snap.verdicts.get(exp.id)
    cand_runs = _runs(snap, exp.id)
    cand = cand_runs.side("candidate")
    base_runs = _baseline_runs(snap, exp)
    comparisons = {(lc.workload, lc.concurrency): lc for lc in (verdict.levels if verdict else [])}
    rows = [
        _level_row(wl, c, base_runs, cand_runs, comparisons.get((wl, c)))
        for wl, c in sorted(set(cand) | set(comparisons), key=_sort_key(snap.workload_order()))
    ]  # levels it reached
    hyp = snap.hypothesis(exp.hypothesis)
    ref = snap.experiment(exp.baseline_ref)
    repeats = _runs(snap, exp.id).repeats.get("candidate", set())
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
        adopt_if_win=bool(hyp and hyp.spec.adopt_if_win),
    )


def _outline_view(snap: CampaignSnapshot, exp: ExperimentRecord) -> ExperimentView:
    """An experiment not read in full: identity, status and verdict, no measured rows."""
    return ExperimentView(
        id=exp.id, hypothesis=exp.hypothesis, attempt=exp.attempt, node=exp.node, status=exp.status,
        config=exp.config, verdict=snap.verdicts.get(exp.id), failure=exp.failure,
        environment=snap.fingerprints.get(exp.fingerprint_id or ""), patch_sha=exp.patch_sha, command=exp.command,
        baseline_id=exp.baseline_ref, node_seconds=exp.node_seconds, started_at=exp.started_at,
        finished_at=exp.finished_at, adopted=exp.adopted,
        adopt_if_win=bool((hyp := snap.hypothesis(exp.hypothesis)) and hyp.spec.adopt_if_win),
    )  # fmt: skip


def dead_ends(snap: CampaignSnapshot) -> list[DeadEnd]:
    """Dead-end verdicts, each marked reopened when the environment moved on a revisit component."""
    latest = snap.fingerprints.get(snap.latest_fingerprint_id or "")
    now = latest.components() if latest else {}
    specs = {h.name: h.spec for h in snap.hypotheses}
    components: dict[str, dict[str, str]] = {}  # per environment, not per dead end (hundreds share a few)
    moved: dict[tuple[str, tuple[str, ...]], bool] = {}  # reopened, per (environment, revisit list)
    out: list[DeadEnd] = []
    for exp in snap.experiments:
        verdict = snap.verdicts.get(exp.id)
        if verdict is None or verdict.kind != "dead_end" or exp.role != "candidate":
            continue
        spec = specs.get(exp.hypothesis)
        revisit = verdict.revisit_on or (spec.revisit_on if spec else [])
        fp_id = exp.fingerprint_id or ""
        then_fp = snap.fingerprints.get(fp_id)
        if then_fp is not None and fp_id not in components:
            components[fp_id] = then_fp.components()
        then = components.get(fp_id, {})
        if (fp_id, tuple(revisit)) not in moved:
            moved[fp_id, tuple(revisit)] = bool(then_fp and latest and changed_components(revisit, then, now))
        out.append(
            DeadEnd(
                hypothesis=exp.hypothesis,
                experiment_id=exp.id,
                reason=verdict.reason,
                failure_class=verdict.failure_class,
                revisit_on=list(revisit),
                environment={k: v for k, v in then.items() if v},
                reopened=moved[fp_id, tuple(revisit)],
            )
        )
    return out


def halt_failure(status: str, experiments: list[ExperimentRecord]) -> Failure | None:
    """Why a failed campaign stopped when its baseline could not run: the last baseline's
    failure (None while the campaign runs, or when it stopped for another reason)."""
    baselines = [e for e in experiments if e.role == "baseline"]
    last = baselines[-1] if baselines else None
    return last.failure if status == "failed" and last is not None and last.status == "failed" else None


def build_view(snap: CampaignSnapshot, memo: Any = None) -> CampaignView:
    """The view of `snap`; `memo` (a `campaign.store.memo.Memo`) reuses each baseline's
    view built from the very same record and rounds before (a campaign adopts a new
    baseline now and then: its history is rebuilt after every verdict otherwise)."""
    c = snap.campaign
    baselines = [e for e in snap.experiments if e.role == "baseline" and e.status == "finished"]
    current = next((e for e in baselines if e.id == c.baseline_experiment_id), baselines[-1] if baselines else None)
    history = [_baseline_view(snap, e, memo) for e in baselines]
    return CampaignView(
        id=c.id,
        name=c.name,
        description=c.description,
        status=c.status,
        halt_reason=c.halt_reason,
        halt_failure=halt_failure(c.status, snap.experiments),
        node=c.node,
        time_scale=c.time_scale,
        headline_workload=next(iter(snap.workload_order()), None),
        min_effect_pct=snap.min_effect_pct(),
        latency_limit=latency_limit(c.playbook),
        baseline=next((b for b in history if current and b.experiment_id == current.id), None),
        baseline_history=history,
        deploy=snap.deploy,
        wins_not_adopted=snap.wins_not_adopted,
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
        planner_calls=snap.planner_calls,
        planner_notes=[e.message for e in snap.events if e.kind == PLANNER_EVENT],
        node_seconds=snap.node_seconds,
        environment_first=None
        if snap.totals is None
        else {
            snap.fingerprints[fp].model_dump_json(): exp_id
            for fp, exp_id in snap.totals["environment_first"].items()
            if fp in snap.fingerprints
        },
        created_at=c.created_at,
        # the campaign row changes with its status alone: an experiment's start or end is news too
        updated_at=max([c.updated_at, *(e.finished_at or e.started_at for e in snap.experiments)]),
    )


def show_json(view: CampaignView) -> dict[str, Any]:
    """The `campaign show --json` document (concurrency keys are strings, as in JSON)."""
    base = view.baseline
    return {
        "id": view.id,
        "name": view.name,
        "status": view.status,
        "halt_reason": view.halt_reason,
        "latency_limit": view.latency_limit.model_dump(mode="json") if view.latency_limit else None,
        "failure": view.halt_failure.shown() if view.halt_failure else None,
        "baseline": None
        if base is None
        else {
            "experiment_id": base.experiment_id,
            "config": base.config.model_dump(mode="json"),
            "figures": {wl: {str(c): v for c, v in levels.items()} for wl, levels in base.figures.items()},
        },
        "min_effect_pct": view.min_effect_pct,
        # the baseline plus the adopted wins, as the node launched it; and the wins left out
        "deploy": view.deploy.model_dump() if view.deploy else None,
        "wins_not_adopted": [w.model_dump() for w in view.wins_not_adopted],
        "planner_calls": [c.model_dump(mode="json") for c in view.planner_calls],
        "planner_notes": list(view.planner_notes),
        "experiments": [
            experiment_json(e, view.min_effect_pct) for e in view.experiments
        ],  # last: `show --json` streams it
    }


def experiment_json(e: ExperimentView, playbook_min_effect_pct: float) -> dict[str, Any]:
    """One experiment as `show --json` gives it: the candidate's change against the
    baseline at every level with its interval's ends and confidence, and what decided
    (`campaign.verdict.explain`, the journal's convention)."""
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for row in e.rows:
        c = row.comparison
        delta = c.delta_pct if c else None
        if delta is None and row.candidate is not None and row.baseline:
            delta = (row.candidate / row.baseline - 1) * 100
        level: dict[str, Any] = {
            "candidate": row.candidate,
            "baseline": row.baseline,
            "delta_pct": delta,
            "low_pct": c.ci_low_pct if c else None,
            "high_pct": c.ci_high_pct if c else None,
            "confidence": c.level_confidence if c else None,
            "winner": c.winner if c else None,
            "latency_ms": row.latency,
        }
        if c is not None and (c.candidate_meets_limit is not None or c.baseline_meets_limit is not None):
            level["meets_latency_limit"] = {"candidate": c.candidate_meets_limit, "baseline": c.baseline_meets_limit}
        metrics.setdefault(row.workload, {})[str(row.concurrency)] = level
    v = e.verdict
    m = explain.bar_of(v, playbook_min_effect_pct)
    compared = explain.compared_levels(e)
    deciding = explain.deciding_levels(v, compared) if v is not None else []
    return {
        "id": e.id,
        "hypothesis": e.hypothesis,
        "verdict": v.kind if v else None,
        "label": explain.marker(e),  # the journal's: WIN (adopted), DEAD END (jit_error), ...
        "reason": v.reason if v else (e.failure.summary if e.failure else ""),
        "decided": explain.decided_line(v, m, compared) if v else None,
        "deciding_level": explain.decided(deciding[0], m).model_dump() if deciding else None,
        "next": explain.next_step(e),
        "failure_class": (v.failure_class.value if v and v.failure_class else None)
        or (e.failure.failure_class.value if e.failure else None),
        # the LLM's guess for a failure no rule matched: beside the class, never the class
        "suggested_class": e.failure.suggested_class.value if e.failure and e.failure.suggested_class else None,
        "failure": e.failure.shown() if e.failure else None,
        "metrics": metrics,
        # what the two servers reported differently, and what confounds the run
        "reported_diff": [r.model_dump(mode="json") for r in v.reported_diff] if v else [],
        "confounded_by": [c.model_dump(mode="json") for c in v.confounded_by] if v else [],
        "attempt": e.attempt,
        "node": e.node,
        "status": e.status,
        "adopted": e.adopted,
        "patch_sha": e.patch_sha,
        "patch": {
            "sha": e.patch.sha,
            "base": e.patch.base,
            "files": e.patch.files,
            "branch": e.patch.branch,
            "patch_sha256": e.patch.patch_sha256,
        }
        if e.patch is not None
        else None,
        "node_seconds": e.node_seconds,
    }


__all__ = [
    "CampaignSnapshot",
    "Runs",
    "build_view",
    "config_diff",
    "dead_ends",
    "experiment_json",
    "experiment_view",
    "light_verdict",
    "show_json",
]
