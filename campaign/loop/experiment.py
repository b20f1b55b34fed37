"""Helpers the nodes share: ids, configs, confound detection, recording a measurement."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache, partial

from campaign.domain.config import diff, merge
from campaign.domain.measurement import Measurement
from campaign.domain.models import ConfigChange, EffectiveConfig, Failure, ReportedConfig, WorkloadSpec
from campaign.domain.records import CorrectnessResult
from campaign.loop.work_check import measurement_work, mixed_work
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.records import LaunchTime, RunSide
from campaign.ports.store import LoopStore
from campaign.verdict import confound
from campaign.verdict.baseline_level import RECENT, recent_level
from campaign.verdict.components import log_table
from campaign.verdict.confound import ConfoundCheck
from campaign.verdict.noise import HISTORY, NodeNoise, estimate


def workloads_of(pb: Playbook) -> list[WorkloadSpec]:
    return [WorkloadSpec.model_validate(w.model_dump()) for w in pb.workloads.values()]


def hypothesis_config(baseline: EffectiveConfig, spec: HypothesisSpec) -> EffectiveConfig:
    return merge(baseline, spec.flags, spec.env, spec.unset_flags)


def confound_changes(
    baseline: EffectiveConfig, candidate: EffectiveConfig, spec: HypothesisSpec | None
) -> list[ConfigChange]:
    """With a spec: the requested changes the hypothesis did not declare (what the
    configs alone tell; `confound_check` adds what the servers report).  Without: the
    whole diff (for the record)."""
    if spec is None:
        return diff(baseline, candidate)
    return confound.check(baseline, candidate, spec.declared_keys()).confounded_by


def reported_pairs(
    store: LoopStore, experiment: str, baseline_id: str | None
) -> list[tuple[ReportedConfig, ReportedConfig]]:
    """(baseline, candidate) as each side's server reported its config, per round: the
    interleaved baseline of the same round, else the campaign baseline's first round."""
    reported: dict[tuple[RunSide, int], ReportedConfig] = {
        (a.side, a.repeat): ReportedConfig.model_validate_json(a.content)
        for a in store.launch_artifacts(experiment, "reported_config")
    }
    fallback = None
    if baseline_id:
        text = store.launch_artifact(baseline_id, "reported_config", side="baseline", repeat=0)
        fallback = ReportedConfig.model_validate_json(text) if text else None
    pairs = []
    for repeat in sorted(r for side, r in reported if side == "candidate"):
        base = reported.get(("baseline", repeat), fallback)
        if base is not None:
            pairs.append((base, reported["candidate", repeat]))
    return pairs


def confound_check(
    store: LoopStore, experiment: str, baseline: EffectiveConfig, spec: HypothesisSpec, baseline_id: str | None
) -> ConfoundCheck:
    """The confound rule (`campaign.verdict.confound`) on the requested configs and on
    what the servers of this experiment reported."""
    return confound.check(
        baseline,
        hypothesis_config(baseline, spec),
        spec.declared_keys(),
        reported_pairs(store, experiment, baseline_id),
    )


def record_measurement(
    store: LoopStore, experiment: str, side: RunSide, repeat: int, m: Measurement, node: str
) -> None:
    """Write every level of every workload (one transaction) and the evidence: before any decision."""
    launch = partial(store.record_launch_artifact, experiment, side=side, repeat=repeat)
    if m.failure is not None:
        launch("failure", m.failure.model_dump_json())
    if m.log_excerpt:
        launch("log_excerpt", "\n".join(m.log_excerpt))
    if m.outputs is not None:
        launch("outputs", json.dumps(m.outputs))
    if m.reported is not None:
        launch("reported_config", m.reported.model_dump_json())
    launch("command", m.command)
    if m.stats:
        launch("server_stats", json.dumps(m.stats, sort_keys=True))
    store.record_launch_time(
        experiment, LaunchTime(side=side, repeat=repeat, node_seconds=m.node_seconds, queue_seconds=m.queue_seconds)
    )
    work = measurement_work(m)
    if work:
        launch("work", json.dumps({k: w.model_dump(mode="json") for k, w in work.items()}, sort_keys=True))
    levels = [
        (name, level, work[name].key if name in work else sweep.prompt_set_hash)
        for name, sweep in m.sweeps.items()
        for level in sweep.levels
    ]
    store.record_side(experiment, side, repeat, levels, node=node)


def recorded_failure(store: LoopStore, experiment: str) -> Failure | None:
    """The first failure recorded for an experiment (the candidate's decides)."""
    first = next(iter(store.launch_artifacts(experiment, "failure")), None)
    return Failure.model_validate_json(first.content) if first else None


def finish_recorded(store: LoopStore, experiment: str) -> None:
    """Make the experiment final with what its launches recorded: the first failure, and
    its node and scheduler-queue seconds summed (the store keeps the campaign's totals
    from these; a resumed node finishes it again with the same figures: a no-op)."""
    failure = recorded_failure(store, experiment)
    times = store.launch_times(experiment)
    store.finish_experiment(
        experiment,
        "failed" if failure else "finished",
        failure=failure,
        node_seconds=round(sum(t.node_seconds for t in times), 3),
        queue_seconds=round(sum(t.queue_seconds for t in times), 3),
    )


def correctness_of(
    store: LoopStore, experiment: str, baseline_id: str | None, pb: Playbook
) -> CorrectnessResult | None:
    """Compare the candidate's greedy outputs with the baseline's (same node, same prompts)."""
    from campaign.verdict.correctness import compare_outputs

    spec = pb.verdict.correctness
    if not spec.enabled:
        return None
    cand = store.launch_artifact(experiment, "outputs", side="candidate", repeat=0)
    base = store.launch_artifact(experiment, "outputs", side="baseline", repeat=0)
    if base is None and baseline_id:
        base = store.launch_artifact(baseline_id, "outputs", side="baseline", repeat=0)
    if cand is None or base is None:
        return None
    return compare_outputs(json.loads(base), json.loads(cand), spec.tolerance)


def _baseline_samples(store: LoopStore, baseline_id: str | None, metric: str) -> dict[tuple[str, int], list[float]]:
    if not baseline_id:
        return {}
    return {
        (s.workload, s.concurrency): [getattr(r, metric) for r in s.baseline] for s in store.level_samples(baseline_id)
    }


def _pooled(by_level: dict[tuple[str, int], list[float]]) -> tuple[float | None, int]:
    from campaign.verdict.stats import noise_estimate

    est = noise_estimate(by_level)
    return (est.pct, est.df) if est else (None, 8)


def baseline_noise(store: LoopStore, baseline_id: str | None, metric: str) -> tuple[float | None, int]:
    """The node's run-to-run noise from the baseline's repeats: (pct, df), the prior
    that lets a verdict trust a single round when the effect is large."""
    return _pooled(_baseline_samples(store, baseline_id, metric))


def launch_tables(
    store: LoopStore, experiment: str, metric: str, side: RunSide = "baseline", work: Mapping[str, str] | None = None
) -> dict[str, list[list[float]]]:
    """One experiment's launches of one side, per workload: rows = launches (repeats
    that measured every level), columns = levels by concurrency; raw figures.  `work`:
    only launches of that work per workload (`campaign.loop.work_check`)."""
    return tables_of(store.side_values([experiment], metric, side, work)[experiment])


def tables_of(values: Sequence[tuple[int, str, int, float]]) -> dict[str, list[list[float]]]:
    """`launch_tables` from (repeat, workload, concurrency, value) rows."""
    return {workload: rows for workload, (_, rows) in _complete_rows(values).items()}


def _complete_rows(
    values: Sequence[tuple[int, str, int, float]],
) -> dict[str, tuple[tuple[int, ...], list[list[float]]]]:
    """Per workload, the repeats that measured every level and their rows (levels by
    concurrency): row i of two workloads is the same launch where their repeats agree."""
    cells: dict[str, dict[int, dict[int, float]]] = {}
    for repeat, workload, concurrency, value in values:
        cells.setdefault(workload, {}).setdefault(repeat, {})[concurrency] = float(value)
    out = {}
    for workload, by_repeat in cells.items():
        levels = sorted({c for row in by_repeat.values() for c in row})
        full = [(r, row) for r, row in sorted(by_repeat.items()) if len(row) == len(levels)]
        if full:
            out[workload] = (tuple(r for r, _ in full), [[row[c] for c in levels] for _, row in full])
    return out


def node_noise(
    store: LoopStore,
    campaign_id: str,
    node: str,
    fingerprint_id: str | None,
    metric: str,
    exclude: str | None = None,
    baseline: str | None = None,
    work: Mapping[str, str] | None = None,
) -> NodeNoise:
    """The node's noise model (`campaign.verdict.noise`) from every launch of the
    baseline config this campaign made on `node` in this environment (the latest
    `noise.HISTORY` experiments): the start baseline, re-measurements and the baseline
    side of every interleaved round.  `exclude`: the experiment being judged (its own
    launches update the prior there).  `baseline`: the baseline experiment the judged one
    compares with; where its config's launches sat lately (`baseline_level`: the latest
    experiments compared with it, and it) goes with the model.  One read of those
    baseline sides (`Store.side_values`); the estimate of the same launches is computed
    once (every round of an experiment asks again, with nothing new from the other
    experiments).  `work`: only launches of that work per workload (the work the
    playbook asks for now: `campaign.loop.work_check`); another work starts its own
    estimate, as another environment does."""
    exps = store.noise_history(campaign_id, node, fingerprint_id, limit=HISTORY, exclude=exclude)
    ids = [i for i, _ in exps]
    values = store.side_values(ids, metric, "baseline", work)
    noise = _estimate_of(tuple(tuple(values[i]) for i in ids)).model_copy(deep=True)
    if baseline is not None:
        recent: list[dict[str, list[list[float]]]] = []
        for i, ref in reversed(exps):  # the latest RECENT with launches of that baseline, read no further
            if (i == baseline or ref == baseline) and (t := _log_tables(values[i])):
                recent.insert(0, t)
                if len(recent) == RECENT:
                    break
        noise.level = recent_level(recent, noise)
    return noise


def _log_tables(values: Sequence[tuple[int, str, int, float]]) -> dict[str, list[list[float]]]:
    return {w: t for w, t in ((w, log_table(r)) for w, r in tables_of(values).items()) if t is not None}


@lru_cache(maxsize=8)
def _estimate_of(sides: tuple[tuple[tuple[int, str, int, float], ...], ...]) -> NodeNoise:
    groups, aligned = [], []
    for values in sides:
        rows = _complete_rows(values)
        tables = {w: t for w, t in ((w, log_table(r)) for w, (_, r) in rows.items()) if t is not None and len(t) >= 2}
        if tables:
            groups.append(tables)
            aligned.append(len({rows[w][0] for w in tables}) <= 1)
    return estimate(groups, aligned)


def provenance_notes(store: LoopStore, experiment: str, pb: Playbook, regimes: dict[str, str]) -> list[str]:
    """The exact work each workload put on both sides (its work key: `campaign.domain.work`),
    whether every launch did the same, and - where workloads disagree - the server's own
    figures per workload."""
    runs = store.runs_for(experiment)
    keys: dict[str, set[str]] = {}
    for r in runs:
        keys.setdefault(r.workload, set()).add(r.work)
    notes = []
    for name, wl in pb.workloads.items():
        h = sorted(keys.get(name, set()))
        cs = ",".join(str(c) for c in wl.concurrency)
        notes.append(
            f"workload {name}: prompts {wl.prompts} (work {'/'.join(x for x in h if x) or '-'}), "
            f"~{wl.prompt_tokens} tokens in, {wl.output_tokens} out, C={cs}, "
            f"{wl.requests_per_level} requests per level"
        )
    for name in mixed_work(store, experiment):
        notes.append(
            f"workload {name}: the launches compared did not all do the same work (prompts, their order, "
            f"request counts, output tokens or endpoint)"
        )
    won = {w for w, r in regimes.items() if r == "candidate"}
    lost = {w for w, r in regimes.items() if r == "baseline"}
    if won and lost:
        figures: dict[str, dict[str, list[float]]] = {}  # stat -> workload -> values (candidate sides)
        for a in store.launch_artifacts(experiment, "server_stats"):
            if a.side == "candidate":
                for w, st in json.loads(a.content).items():
                    for stat, value in st.items():
                        if value is not None and w in pb.workloads:
                            figures.setdefault(stat, {}).setdefault(w, []).append(float(value))
        for stat, by_wl in sorted(figures.items()):
            parts = [f"{sum(v) / len(v):.2f} on {w} (prompts {pb.workloads[w].prompts})" for w, v in by_wl.items()]
            notes.append(f"the workloads disagree; the server reported {stat} " + " vs ".join(parts))
    return notes
