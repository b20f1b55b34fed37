"""The headline workload is the playbook's first workload, whatever its name: the
baseline's headline and the verdict's headline change.  The scoreboard shows the level
that decided the verdict (`campaign.verdict.explain`)."""

from __future__ import annotations

from pathlib import Path

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.journal.baseline_section import baseline_headline
from campaign.journal.format import deciding_cells
from campaign.journal.render import render_journal
from campaign.playbook.schema import HypothesisSpec, Playbook, VerdictSpec
from campaign.store import Store
from campaign.verdict.rule import compare_levels, decide

PLAYBOOK = {
    "name": "burst-first",
    # the first workload is the headline; `single_stream` comes second here
    "workloads": {"burst": {"concurrency": [4, 16]}, "single_stream": {"concurrency": [1]}},
}
BASE = EffectiveConfig(flags={"cuda-graph-max-bs": 512})
CAND = EffectiveConfig(flags={"cuda-graph-max-bs": 128})
FIGURES = {  # (workload, C) -> (baseline, candidate) tok/s
    ("burst", 4): (300.0, 330.0),
    ("burst", 16): (700.0, 760.0),
    ("single_stream", 1): (82.0, 84.0),
}


def _record(store: Store, exp_id: str, side: str, which: int) -> None:
    for rep in range(3):
        for (wl, c), values in FIGURES.items():
            lv = LevelResult(concurrency=c, requests=c, output_tokens_per_s=values[which] * (1 + 0.002 * (rep - 1)))
            store.record_run(exp_id, side, rep, wl, lv, work="ph", node="sim-0")


def test_first_workload_of_the_playbook_is_the_headline(tmp_path: Path) -> None:
    pb = Playbook.model_validate(PLAYBOOK)
    assert pb.headline_workload == "burst"
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb.model_dump(mode="json"), node="sim-0").id
    store.upsert_hypothesis(cid, HypothesisSpec(name="smaller-graph", flags={"cuda-graph-max-bs": 128}))
    base = store.start_experiment(cid, "baseline", role="baseline", config=BASE, node="sim-0", reason="start")
    _record(store, base.id, "baseline", 0)
    store.finish_experiment(base.id, node_seconds=10.0)
    store.update_campaign(cid, baseline_experiment_id=base.id)
    exp = store.start_experiment(cid, "smaller-graph", config=CAND, node="sim-0", baseline_ref=base.id)
    _record(store, exp.id, "candidate", 1)
    _record(store, exp.id, "baseline", 0)
    spec = VerdictSpec()
    v = decide(compare_levels(store.level_samples(exp.id), spec), spec, primary_workload=pb.headline_workload)
    store.record_verdict(exp.id, v)
    store.finish_experiment(exp.id, node_seconds=10.0)

    view = store.view(cid)
    assert view.headline_workload == "burst"
    (e,) = view.experiments
    assert e.verdict is not None and e.verdict.headline_delta_pct is not None
    assert round(e.verdict.headline_delta_pct, 1) == 10.0  # burst C=4
    figure, change = deciding_cells(e)  # the strongest win: the highest lower end
    assert figure == "330.0 vs 300.0 tok/s (burst C=4)" and change.startswith("+10.0% [+")
    head = baseline_headline(view.baseline, view.headline_workload)  # type: ignore[arg-type]
    assert head is not None and (head.label, head.value) == ("burst C=4", 300.0)
    doc = render_journal(view)
    assert f"| 1 | smaller-graph | WIN | 330.0 vs 300.0 tok/s (burst C=4) | {change} |" in doc
