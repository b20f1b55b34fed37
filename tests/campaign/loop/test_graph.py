"""The campaign graph, compiled with an in-memory checkpointer, against the real
simulated node (a real HTTP server process per measurement)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command

from campaign.cli.wiring import build_deps
from campaign.loop.graph import build_graph
from campaign.loop.nodes import Nodes
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

HYPS = [
    {
        "name": "smaller-cuda-graph",
        "rationale": "frees memory for the KV cache",
        "flags": {"cuda-graph-max-bs": 128},
        "adopt_if_win": True,
    },
    {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
    {
        "name": "nccl-fewer-channels",
        "env": {"NCCL_MIN_NCHANNELS": "2", "NCCL_MAX_NCHANNELS": "2"},
        "flags": {"chunked-prefill-size": 4096},
        "declares": ["NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"],
    },
]


def _setup(tmp_path: Path, hyps, db: str = "", **over):
    pb = load_playbook(sim_playbook(tmp_path, hyps, **over))
    store = Store(db or tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb, playbook_path=str(tmp_path / "playbook.yaml")).id
    for i, h in enumerate(pb.hypotheses):
        store.upsert_hypothesis(cid, h, position=i)
    deps = build_deps(pb, store, db_path=tmp_path / "campaign.db", events=None)
    return pb, store, cid, deps


def _launches(store: Store, experiment_id: str) -> int:
    return len({r.repeat for r in store.runs_for(experiment_id, "baseline")})


def test_build_graph_is_uncompiled():
    assert isinstance(build_graph.__call__, object)
    from campaign.loop.deps import Deps
    from campaign.playbook.schema import Playbook

    pb = Playbook.model_validate({"name": "x", "workloads": {"w": {}}})
    g = build_graph(Deps(playbook=pb, store=None, nodes=[]))
    assert isinstance(g, StateGraph)
    assert {
        "fingerprint",
        "baseline",
        "propose",
        "gate",
        "apply",
        "measure",
        "verdict",
        "record",
        "render",
        "review",
        "finish",
    } <= set(g.nodes)


@pytest.mark.slow
def test_campaign_reaches_verdicts_and_moves_the_baseline(tmp_path):
    # the baseline starts with custom all-reduce forced over PCIe (about half the speed):
    # dropping it is a win far outside the noise, adopted as the new baseline
    hyps = [
        {
            "name": "no-custom-allreduce",
            "rationale": "PCIe contention",
            "unset_flags": ["enable-custom-all-reduce"],
            "adopt_if_win": True,
        }
    ] + HYPS[1:]
    pb, store, cid, deps = _setup(
        tmp_path,
        hyps,
        baseline={"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88, "enable-custom-all-reduce": True}},
    )
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    graph.invoke({"campaign_id": cid}, cfg)
    data = store.show_json(cid)
    verdicts = {e["hypothesis"]: e for e in data["experiments"] if e["hypothesis"] != "baseline"}
    assert verdicts["no-custom-allreduce"]["verdict"] == "win"
    assert verdicts["no-custom-allreduce"]["adopted"] is True
    assert verdicts["flashinfer-allreduce-fusion"]["verdict"] == "dead_end"
    assert verdicts["flashinfer-allreduce-fusion"]["failure_class"] == "jit_error"
    assert verdicts["nccl-fewer-channels"]["verdict"] == "inconclusive"
    assert "confounded" in verdicts["nccl-fewer-channels"]["reason"]
    assert "chunked-prefill-size" in verdicts["nccl-fewer-channels"]["reason"]
    (confounded,) = store.list_experiments(cid, hypothesis="nccl-fewer-channels")
    # no number of repeats makes a confounded run a result: the minimum, not the adaptive maximum
    assert {len(s.candidate) for s in store.level_samples(confounded.id)} == {pb.verdict.repeats.min}
    # the adopted win became the baseline: re-measured without the flag
    assert "enable-custom-all-reduce" not in data["baseline"]["config"]["flags"]
    start, adopted = store.list_experiments(cid, role="baseline")
    # the start baseline is the node's noise floor (repeats.baseline launches); the adopted
    # win's re-measurement adds to a history (max(2, repeats.min))
    assert [_launches(store, e.id) for e in (start, adopted)] == [pb.verdict.repeats.baseline, 2] == [4, 2]
    assert data["status"] == "finished"
    journal = Path(pb.journal).read_text()
    assert "DEAD END" in journal and "jit_error" in journal and "INCONCLUSIVE" in journal
    # the current baseline (the adopted win's) says what its noise figure stands on
    assert re.search(r"run-to-run noise ±\d+\.\d% over 2 launches\.", journal)


@contextmanager
def _saver(db: str):
    """PostgreSQL's checkpointer with the store on PostgreSQL, else one in memory."""
    if "://" not in db:
        yield InMemorySaver()
        return
    from campaign.cli.killsaver import postgres_saver

    with postgres_saver(db) as saver:
        yield saver


@pytest.mark.slow
def test_review_halt_and_resume_with_environment_change(tmp_path, backend_db):
    hyps = [{"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}}]
    db = backend_db if "://" in backend_db else ""
    pb, store, cid, deps = _setup(tmp_path, hyps, db=db, review={"after_consecutive_dead_ends": 1})
    with _saver(db) as saver:
        _review_halt_and_resume(tmp_path, pb, store, cid, deps, saver)


def _review_halt_and_resume(tmp_path, pb, store, cid, deps, saver):
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    graph = build_graph(deps).compile(checkpointer=saver)
    graph.invoke({"campaign_id": cid}, cfg)
    snap = graph.get_state(cfg)
    assert snap.next == ("review",)
    assert store.get_campaign(cid).status == "awaiting_review"
    assert "1 dead ends in a row" in store.get_campaign(cid).halt_reason
    # the reviewer upgrades CUDA: new deps from the overridden playbook, resume the same thread
    from campaign.playbook.load import apply_overrides

    pb13 = apply_overrides(pb, {"node.cuda": "13.0"})
    deps13 = build_deps(pb13, store, db_path=tmp_path / "campaign.db", events=None)
    graph13 = build_graph(deps13).compile(checkpointer=saver)
    graph13.invoke(Command(resume={"decision": "approve", "note": "cuda 13"}), cfg)
    exps = [e for e in store.show_json(cid)["experiments"] if e["hypothesis"] == "flashinfer-allreduce-fusion"]
    assert [e["attempt"] for e in exps] == [1, 2]
    assert exps[0]["failure_class"] == "jit_error"
    assert exps[1]["failure_class"] is None  # CUDA 13 JIT supports sm_120: it ran and was measured
    baselines = [e for e in store.list_experiments(cid, role="baseline")]
    assert len(baselines) == 2 and "environment change" in baselines[1].reason
    # a changed environment starts its own noise estimate: its baseline measures the floor again
    assert [_launches(store, e.id) for e in baselines] == [4, 4]
    assert graph13.get_state(cfg).next == ()
    assert store.get_campaign(cid).status == "finished"
    assert [r.decision for r in store.list_reviews(cid)] == ["approve"]
    # the loop's kept counts (budget, streaks, node time) are what the records say from scratch
    kept = store.loop_tally(cid)
    assert kept == store.recount_tally(cid)
    assert kept.experiments_done == 2 and kept.node_seconds > 0
    # a `record` that runs again (resumed after a kill) changes no count
    state = {
        **graph13.get_state(cfg).values,
        "current": {
            "hypothesis": exps[1]["hypothesis"],
            "attempt": 2,
            "experiment_id": exps[1]["id"],
            "rounds": 2,
            "side": "",
        },
    }
    again = [Nodes(deps13).record(state) for _ in range(2)]
    assert again[0] == again[1] and (again[0]["experiments_done"], again[0]["no_win_streak"]) == (2, kept.no_win)
    assert store.loop_tally(cid) == kept == store.recount_tally(cid)


@pytest.mark.slow
def test_reject_at_review_stops_the_campaign(tmp_path):
    hyps = [
        {"name": "torch-symm-mem", "flags": {"enable-torch-symm-mem": True}},
        {"name": "never-run", "flags": {"cuda-graph-max-bs": 256}},
    ]
    pb, store, cid, deps = _setup(tmp_path, hyps, review={"after_consecutive_dead_ends": 1})
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, cfg)
    assert graph.get_state(cfg).next == ("review",)
    graph.invoke(Command(resume={"decision": "reject", "note": "enough"}), cfg)
    camp = store.get_campaign(cid)
    assert camp.status == "finished" and camp.halt_reason.startswith("stopped at review")
    assert [r.decision for r in store.list_reviews(cid)] == ["reject"]
    assert store.list_experiments(cid, hypothesis="never-run") == []


@pytest.mark.slow
def test_correctness_gate_makes_a_fast_but_wrong_kernel_a_dead_end(tmp_path):
    hyps = [
        {
            "name": "fp8-kv-triton",
            "rationale": "half the KV bytes",
            "flags": {"kv-cache-dtype": "fp8_e4m3", "attention-backend": "triton"},
        }
    ]
    pb, store, cid, deps = _setup(tmp_path, hyps)
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 1000})
    (exp,) = [e for e in store.show_json(cid)["experiments"] if e["hypothesis"] == "fp8-kv-triton"]
    assert (exp["verdict"], exp["failure_class"]) == ("dead_end", "incorrect")
    assert "greedy outputs differ" in exp["reason"]


@pytest.mark.slow
def test_adopted_wins_are_revalidated_together_against_the_original_baseline(tmp_path):
    hyps = [
        {"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}, "adopt_if_win": True},
        {"name": "torch-symm-mem", "flags": {"enable-torch-symm-mem": True}, "adopt_if_win": True},
    ]
    pb, store, cid, deps = _setup(tmp_path, hyps, node={"cuda": "13.0"})
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 1000})
    adopted = [e.hypothesis for e in store.list_experiments(cid, role="candidate") if e.adopted]
    stack = store.list_experiments(cid, hypothesis="stack-check-1")
    if len(adopted) < 2:  # noise made one of them inconclusive: then nothing is stacked
        assert stack == []
        return
    assert len(stack) == 1 and store.get_verdict(stack[0].id) is not None
    spec = store.get_hypothesis(cid, "stack-check-1").spec
    assert spec.flags == {"cuda-graph-max-bs": 128, "enable-torch-symm-mem": True}
    (event,) = store.events(cid, "stack")
    assert event.message.startswith("stack of 2 adopted wins (expected +")
    assert store.get_campaign(cid).status == "finished"


class _EngineVersionUnread:
    """The simulated node as a real node was fingerprinted before its probe read the
    engine's version: the same node, `engine_version` unknown."""

    def __init__(self, node) -> None:
        self._node = node

    def __getattr__(self, name):
        return getattr(self._node, name)

    def fingerprint(self):
        return self._node.fingerprint().model_copy(update={"engine_version": ""})


@pytest.mark.slow
def test_a_component_read_for_the_first_time_on_resume_is_the_same_environment(tmp_path):
    """A campaign begun when the node's fingerprint could not read the engine's version,
    resumed by a `campaign` that reads it: no environment change (nothing re-opened, no
    baseline re-measured) and the experiments after it keep the noise history of those
    before (the same environment id); before, they started an empty one."""
    hyps = [
        {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
        {"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}},
    ]
    pb, store, cid, deps = _setup(tmp_path, hyps, review={"after_consecutive_dead_ends": 1})
    real = deps.nodes[0]
    deps.nodes[0] = _EngineVersionUnread(real)
    saver = InMemorySaver()
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    build_graph(deps).compile(checkpointer=saver).invoke({"campaign_id": cid}, cfg)
    assert store.get_campaign(cid).status == "awaiting_review"
    deps.nodes[0] = real
    graph = build_graph(deps).compile(checkpointer=saver)
    graph.invoke(Command(resume={"decision": "approve", "note": "upgraded campaign"}), cfg)
    assert store.get_campaign(cid).status == "finished"
    assert store.latest_fingerprint(cid).engine_version  # the version is read now
    (baseline,) = store.list_experiments(cid, role="baseline")
    dead, measured = (store.list_experiments(cid, hypothesis=h["name"]) for h in hyps)
    assert len(dead) == 1  # its revisit condition names engine_version: unknown -> known is no change
    assert measured[0].fingerprint_id == baseline.fingerprint_id
