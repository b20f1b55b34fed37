"""A campaign that outlives a change of its work (the playbook's output length edited
between runs, or `campaign` upgraded across the load generator's prompt-order change)
compares only launches that did the same work: the real graph with the lab's in-process
node and real SQLite stores; the work keys come from the real `record_measurement`."""

from __future__ import annotations

import math
import random
import re

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bench.lab_engine import CASE_FLAG, Case, LabNode, Structure
from campaign.domain.measurement import Measurement
from campaign.domain.models import EffectiveConfig, LevelResult, SweepResult, WorkloadSpec
from campaign.domain.prompts import build_prompt_set
from campaign.domain.records import CorrectnessResult, Verdict
from campaign.domain.work import MEASUREMENT_PROTOCOL, work_of
from campaign.loop.deps import Deps
from campaign.loop.drift_check import check_drift
from campaign.loop.experiment import node_noise, record_measurement
from campaign.loop.graph import build_graph
from campaign.loop.work_check import asked_work, expected_keys, mixed_work, stale_baseline
from campaign.playbook.schema import Playbook
from campaign.store import Store
from campaign.verdict.gates import same_work

WORKLOADS = {
    "single_stream": {"concurrency": [1], "prompts": "fixed", "output_tokens": 128, "requests_per_level": 4},
    "parallel": {"concurrency": [1, 10], "prompts": "diverse", "output_tokens": 128, "requests_per_level": "2*C"},
}


def _playbook(output_tokens: int = 128, dead_ends_to_review: int | None = 1) -> Playbook:
    workloads = {k: dict(v) for k, v in WORKLOADS.items()}
    workloads["parallel"]["output_tokens"] = output_tokens
    return Playbook.model_validate(
        {
            "name": "work",
            "workloads": workloads,
            "verdict": {
                "min_effect_pct": 2,
                "repeats": {"min": 2, "max": 4, "baseline": 4},
                "correctness": {"enabled": False},
            },
            "review": {
                "after_no_win_streak": None,
                "after_consecutive_dead_ends": dead_ends_to_review,
                "before_patch": False,
            },
            "hypotheses": [{"name": f"case-{i}", "flags": {CASE_FLAG: i}, "declares": [CASE_FLAG]} for i in range(2)],
        }
    )


def _sweep(spec: WorkloadSpec, value: float, protocol: int = MEASUREMENT_PROTOCOL) -> SweepResult:
    return SweepResult(
        workload=spec,
        prompt_set_hash=build_prompt_set(spec).hash,
        protocol=protocol,
        levels=[LevelResult(concurrency=c, requests=2 * c, output_tokens_per_s=value * c) for c in spec.concurrency],
    )


def _measure(pb: Playbook, value: float, protocol: int = MEASUREMENT_PROTOCOL) -> Measurement:
    return Measurement(
        sweeps={
            n: _sweep(WorkloadSpec.model_validate({"name": n, **w.model_dump()}), value, protocol)
            for n, w in pb.workloads.items()
        },
        command="m",
    )


def _lab_campaign(tmp_path, pb: Playbook) -> tuple[LabNode, Store, str]:
    """The lab's node with two cases (case-0 8% slower everywhere, case-1 8% faster) and
    a campaign of the playbook's hypotheses in a real SQLite store."""
    levels = [(n, c) for n, w in pb.workloads.items() for c in w.concurrency]
    cases = [Case("uniform", {lv: -8.0 for lv in levels}), Case("uniform", {lv: 8.0 for lv in levels})]
    specs = [WorkloadSpec.model_validate({"name": n, **w.model_dump()}) for n, w in pb.workloads.items()]
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    for i, h in enumerate(pb.hypotheses):
        store.upsert_hypothesis(cid, h, position=i)
    return LabNode("work", Structure("offset", 1.0), cases, specs), store, cid


def test_an_edited_output_length_measures_the_baseline_again_and_starts_its_own_noise_estimate(tmp_path):
    """The reviewer doubles the parallel workload's output length at a review gate: the
    campaign baseline measured with 128 tokens compares with nothing measured now, so
    the campaign measures it again (saying what changed) with the launches a fresh noise
    estimate needs, and the next verdict's noise model reads only launches of the new
    work.  Before the work key, the old baseline stood and nothing was re-measured."""
    pb = _playbook()
    node, store, cid = _lab_campaign(tmp_path, pb)
    saver = InMemorySaver()
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    build_graph(Deps(playbook=pb, store=store, nodes=[node], journal_path=None)).compile(checkpointer=saver).invoke(
        {"campaign_id": cid}, cfg
    )
    assert store.get_campaign(cid).status == "awaiting_review"  # case-0 is slower: a dead end

    pb256 = _playbook(output_tokens=256)
    graph = build_graph(Deps(playbook=pb256, store=store, nodes=[node], journal_path=None)).compile(checkpointer=saver)
    graph.invoke(Command(resume={"decision": "approve", "note": "longer outputs"}), cfg)
    first, second = store.list_experiments(cid, role="baseline")
    assert second.reason == (
        f"the work changed since baseline {first.id} was measured (parallel: output_tokens 128 -> 256)"
    )
    assert len({r.repeat for r in store.runs_for(second.id, "baseline")}) == 4  # a fresh estimate's floor
    (faster,) = store.list_experiments(cid, hypothesis="case-1")
    assert faster.baseline_ref == second.id
    v = store.get_verdict(faster.id)
    assert v is not None and v.kind == "win"
    # parallel's noise rests on the new baseline's 4 launches (3 df), not on the 128-token
    # launches before them; single_stream's work did not change: its history stands
    assert re.search(r"parallel [\d.]+% \(df 3 between launches", v.noise), v.noise
    assert re.search(r"single_stream [\d.]+% \(df 7\)", v.noise), v.noise
    assert store.get_campaign(cid).status == "finished"


def test_an_edit_while_an_experiment_runs_measures_the_baseline_before_the_next_one(tmp_path):
    """Stopped before the first experiment's verdict (its rounds all measured with 128
    tokens), the playbook edited, resumed: that verdict stands (its launches did one
    work), and the baseline is measured again before the next hypothesis, not after it."""
    pb = _playbook(dead_ends_to_review=None)
    node, store, cid = _lab_campaign(tmp_path, pb)
    saver = InMemorySaver()
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    build_graph(Deps(playbook=pb, store=store, nodes=[node], journal_path=None)).compile(
        checkpointer=saver, interrupt_before=["verdict"]
    ).invoke({"campaign_id": cid}, cfg)
    pb64 = _playbook(output_tokens=64, dead_ends_to_review=None)
    build_graph(Deps(playbook=pb64, store=store, nodes=[node], journal_path=None)).compile(checkpointer=saver).invoke(
        None, cfg
    )
    (slower,) = store.list_experiments(cid, hypothesis="case-0")
    assert store.get_verdict(slower.id).kind == "dead_end"  # one work on both sides: a result
    first, second = store.list_experiments(cid, role="baseline")
    assert second.reason == (
        f"the work changed since baseline {first.id} was measured (parallel: output_tokens 128 -> 64)"
    )
    (faster,) = store.list_experiments(cid, hypothesis="case-1")
    assert faster.baseline_ref == second.id and faster.started_at > second.started_at
    assert store.get_verdict(faster.id).kind == "win"


def test_an_experiment_that_straddles_a_work_change_is_not_a_result(tmp_path):
    """Two rounds measured, `campaign` upgraded across the prompt-order change, two more:
    both sides ran both works, so comparing the sides' sets of prompt hashes saw nothing
    wrong; the launches did not all do the same work, and the verdict says so."""
    pb = _playbook()
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    eid = store.start_experiment(cid, "case-1", config=EffectiveConfig(), attempt=1).id
    for rnd in range(4):
        protocol = 1 if rnd < 2 else MEASUREMENT_PROTOCOL
        for side, value in (("candidate", 110.0), ("baseline", 100.0)):
            record_measurement(store, eid, side, rnd, _measure(pb, value, protocol), "n")
    assert mixed_work(store, eid) == ["parallel", "single_stream"]
    win = Verdict(kind="win", reason="faster at every level")
    assert same_work(win, mixed_work(store, eid)).kind == "inconclusive"
    assert "not the same work" in same_work(win, ["parallel"]).reason
    slower = Verdict(kind="dead_end", reason="slower", revisit_on=["cuda"])
    assert same_work(slower, ["parallel"]).model_dump(include={"kind", "revisit_on"}) == {
        "kind": "inconclusive",
        "revisit_on": [],
    }
    wrong = Verdict(
        kind="dead_end",
        reason="outputs differ",
        correctness=CorrectnessResult(prompts=4, mismatches=3, tolerance=0.0, passed=False),
    )
    assert same_work(wrong, ["parallel"]) == wrong  # greedy outputs do not depend on the load
    assert same_work(win, []) == win


def test_the_campaign_baseline_counts_where_the_experiment_has_no_baseline_side(tmp_path):
    pb = _playbook()
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    base = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=1).id
    record_measurement(store, base, "baseline", 0, _measure(pb, 100.0, protocol=1), "n")
    store.finish_experiment(base, "finished")
    eid = store.start_experiment(cid, "case-1", config=EffectiveConfig(), attempt=1, baseline_ref=base).id
    record_measurement(store, eid, "candidate", 0, _measure(pb, 110.0), "n")
    assert mixed_work(store, eid) == ["parallel", "single_stream"]
    record_measurement(store, eid, "baseline", 0, _measure(pb, 100.0), "n")  # its own side: the ref is not read
    assert mixed_work(store, eid) == []


def test_a_stale_baseline_says_what_changed(tmp_path):
    pb = _playbook()
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    base = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=1).id
    record_measurement(store, base, "baseline", 0, _measure(pb, 100.0), "n")
    assert stale_baseline(store, base, pb) is None
    assert stale_baseline(store, base, _playbook(output_tokens=64)) == (
        f"the work changed since baseline {base} was measured (parallel: output_tokens 128 -> 64)"
    )
    # recorded by the load generator before the prompt cursor ran on across levels
    old = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=2).id
    record_measurement(store, old, "baseline", 0, _measure(pb, 100.0, protocol=1), "n")
    assert stale_baseline(store, old, pb) == (
        f"the work changed since baseline {old} was measured "
        "(parallel: protocol 1 -> 2, single_stream: protocol 1 -> 2)"
    )
    # a record from before the work key (the bare prompt-set hash, no work artifact)
    bare = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=3).id
    spec = WorkloadSpec.model_validate({"name": "parallel", **pb.workloads["parallel"].model_dump()})
    store.record_side(
        bare, "baseline", 0, [("parallel", LevelResult(concurrency=1, requests=2), build_prompt_set(spec).hash)]
    )
    assert stale_baseline(store, bare, pb) == (
        f"the work changed since baseline {bare} was measured (parallel: "
        "measured by an earlier campaign version (its prompt order, protocol 1))"
    )
    # a baseline already asked for today's work that recorded other work (a node adapter
    # whose sweeps do not name their workload): measuring it again would change nothing,
    # and would repeat after every experiment
    store.record_artifact(bare, "asked_work", asked_work(pb))
    assert stale_baseline(store, bare, pb) is None
    assert stale_baseline(store, bare, _playbook(output_tokens=64)) is not None  # asked for other work: stale


def test_work_keys_cover_what_the_server_is_asked_to_do():
    spec = WorkloadSpec.model_validate({"name": "p", **WORKLOADS["parallel"]})
    h = build_prompt_set(spec).hash
    key = work_of(spec, h).key
    assert work_of(spec.model_copy(update={"name": "renamed"}), h).key == key
    for changed in (
        {"output_tokens": 256},
        {"requests_per_level": "3*C"},
        {"warmup_requests": 2},
        {"endpoint": "chat"},
        {"concurrency": [1, 2, 10]},
    ):
        assert work_of(spec.model_copy(update=changed), h).key != key, changed
    assert work_of(spec, h, protocol=1).key != key
    assert work_of(spec, "another-prompt-set").key != key
    assert expected_keys(_playbook())["parallel"] == key


def test_noise_and_drift_read_only_launches_of_todays_work(tmp_path):
    """The start baseline was measured before the prompt cursor (its C=10 read the prefix
    cache: 25% fast); today's launches of the same config sit 25% lower.  Without the
    work filter that reads as the node moving, on every launch."""
    pb = _playbook()
    rng = random.Random(3)
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    base = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=1, node="n").id
    for r in range(4):
        record_measurement(store, base, "baseline", r, _measure(pb, 125.0 * math.exp(rng.gauss(0, 0.01)), 1), "n")
    store.finish_experiment(base, "finished")
    eid = store.start_experiment(cid, "h", config=EffectiveConfig(), attempt=1, baseline_ref=base, node="n").id
    for r in range(2):
        record_measurement(store, eid, "baseline", r, _measure(pb, 100.0 * math.exp(rng.gauss(0, 0.01))), "n")
    work = expected_keys(pb)
    everything = node_noise(store, cid, "n", None, "output_tokens_per_s", exclude=eid)
    assert check_drift(store, cid, base, eid, 1, "output_tokens_per_s", everything) is not None
    today = node_noise(store, cid, "n", None, "output_tokens_per_s", exclude=eid, work=work)
    assert today.describe() != everything.describe()
    assert check_drift(store, cid, base, eid, 1, "output_tokens_per_s", today, work=work) is None


def test_how_the_baseline_moved_compares_only_the_same_work(tmp_path):
    """The journal's baseline history gives each re-measurement's change from the one
    before; a baseline whose headline workload did other work (its output length
    doubled) is not 'x% faster': the line says the work changed instead of a figure that
    compares 256-token requests with 128-token ones.  The same work compares as before."""
    from campaign.journal.baseline_section import baseline_context

    pb = _playbook()
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    longer = Playbook.model_validate(
        {**pb.model_dump(mode="json"), "workloads": {n: {**w, "output_tokens": 256} for n, w in WORKLOADS.items()}}
    )
    for i, (book, value) in enumerate(((pb, 100.0), (pb, 110.0), (longer, 60.0))):
        eid = store.start_experiment(cid, "baseline", config=EffectiveConfig(), attempt=i + 1, role="baseline").id
        for rnd in range(2):
            record_measurement(store, eid, "baseline", rnd, _measure(book, value + rnd), "n")
        store.finish_experiment(eid, "finished")
    history = [str(line) for line in baseline_context(store.view(cid))["history"]]
    assert ", +10.0%, " in history[1], history[1]
    assert "%" not in history[2].split("(single_stream C=1)")[1].split("`")[0], history[2]
    assert ", not compared (other work: output_tokens 128 -> 256), " in history[2], history[2]
