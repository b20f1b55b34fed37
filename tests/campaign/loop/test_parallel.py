"""Hypotheses on several nodes: the batching rule and the merge (pure), the playbook's
checks, and a real campaign on two simulated nodes (real server processes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from campaign.cli.wiring import build_deps
from campaign.domain.errors import UserError
from campaign.loop.graph import build_graph
from campaign.loop.parallel import collect_results, merge_results, pick_batch
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.store import Store
from tests.campaign.sim_playbook import FAST_NODE, sim_playbook


def _h(name: str, **kw) -> HypothesisSpec:
    return HypothesisSpec(name=name, **kw)


def _pb(**kw) -> Playbook:
    return Playbook.model_validate({"name": "p", "workloads": {"w": {}}, **kw})


# ------------------------------------------------------------------ batching rule
def test_independent_hypotheses_fill_the_nodes_in_queue_order():
    q = [_h("a"), _h("b"), _h("c")]
    assert [h.name for h in pick_batch(q, done=set(), capacity=2)] == ["a", "b"]
    assert [h.name for h in pick_batch(q, done=set(), capacity=5)] == ["a", "b", "c"]
    assert pick_batch([], done=set(), capacity=3) == []


@pytest.mark.parametrize(
    "barrier",
    [
        {"adopt_if_win": True},
        {"patch": "patches/x.diff"},
        {"depends_on": ["a"]},
    ],
)
def test_a_barrier_runs_alone_and_later_ones_wait(barrier):
    q = [_h("a"), _h("x", **barrier), _h("c")]
    assert [h.name for h in pick_batch(q, done=set(), capacity=3)] == ["a"]  # x and c wait for a
    assert [h.name for h in pick_batch(q[1:], done=set(), capacity=3)] == ["x"]  # x alone


def test_a_dependency_already_done_is_no_barrier():
    q = [_h("b", depends_on=["a"]), _h("c")]
    assert [h.name for h in pick_batch(q, done={"a"}, capacity=2)] == ["b", "c"]


def test_results_reducer_appends_and_the_join_clears():
    acc = collect_results(None, [{"hypothesis": "a"}])
    acc = collect_results(acc, [{"hypothesis": "b"}])
    assert [r["hypothesis"] for r in acc] == ["a", "b"]
    assert collect_results(acc, None) == []


def test_merge_counts_in_queue_order_and_applies_the_policy_once():
    pb = _pb(review={"after_no_win_streak": 3}, budget={"max_experiments": 50})
    state = {"experiments_done": 4, "no_win_streak": 1, "dead_end_streak": 1}
    # node 1's win came after node 0's dead end in queue order: the streaks restart at the win
    up = merge_results(
        state, [{"node_index": 1, "kind": "win"}, {"node_index": 0, "kind": "dead_end"}], pb, hours_spent=0
    )
    assert (up["experiments_done"], up["no_win_streak"], up["dead_end_streak"]) == (6, 0, 0)
    assert "halt" not in up and up["batch"] == [] and up["results"] is None
    up = merge_results(
        state,
        [
            {"node_index": 0, "kind": "win"},
            {"node_index": 1, "kind": "dead_end"},
            {"node_index": 2, "kind": "inconclusive"},
        ],
        pb,
        hours_spent=0,
    )
    assert (up["no_win_streak"], up["dead_end_streak"]) == (2, 1)
    up = merge_results(
        state, [{"node_index": 0, "kind": "dead_end"}, {"node_index": 1, "kind": "inconclusive"}], pb, hours_spent=0
    )
    assert up["halt"]["kind"] == "review" and "3 experiments in a row" in up["halt"]["reason"]


def test_merge_applies_the_queue_budget_like_the_serial_record():
    pb = _pb(budget={"max_experiments": 50, "max_queue_hours": 2})
    batch = [{"node_index": 0, "kind": "inconclusive"}]
    assert "halt" not in merge_results({}, batch, pb, hours_spent=0, queue_hours=1.5)
    up = merge_results({}, batch, pb, hours_spent=0, queue_hours=2.5)
    assert "max_queue_hours=2" in up["halt"]["reason"]


def test_merge_carries_an_adopted_config():
    up = merge_results(
        {},
        [
            {
                "node_index": 0,
                "kind": "win",
                "adopted_config": {"flags": {"x": 1}, "env": {}},
                "need_baseline": "adopted win 'a'",
            }
        ],
        _pb(),
        hours_spent=0,
    )
    assert up["baseline_config"] == {"flags": {"x": 1}, "env": {}} and up["need_baseline"] == "adopted win 'a'"


# ------------------------------------------------------------------ playbook checks
def test_several_nodes_need_distinct_names_and_interleave(tmp_path):
    twins = [{**FAST_NODE, "name": "sim"}, {**FAST_NODE, "name": "sim"}]
    with pytest.raises(UserError, match="nodes"):
        load_playbook(sim_playbook(tmp_path, [], nodes=twins))
    two = [{**FAST_NODE, "name": "a"}, {**FAST_NODE, "name": "b"}]
    with pytest.raises(UserError, match="interleave"):
        load_playbook(sim_playbook(tmp_path, [], nodes=two, verdict={"interleave": False}))
    assert len(load_playbook(sim_playbook(tmp_path, [], nodes=two)).all_nodes()) == 2


def test_one_node_keeps_the_sequential_graph_and_two_add_the_fan_out(tmp_path):
    from campaign.loop.deps import Deps

    one = build_graph(Deps(playbook=_pb(), store=None, nodes=[object()]))
    two = build_graph(Deps(playbook=_pb(), store=None, nodes=[object(), object()]))
    assert "experiment" not in one.nodes and "join" not in one.nodes
    assert {"experiment", "join"} <= set(two.nodes)


# ------------------------------------------------------------------ real campaign
HYPS = [
    {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
    {"name": "no-cuda-graph", "flags": {"disable-cuda-graph": True}},
    {"name": "chunked-prefill", "flags": {"chunked-prefill-size": 1024}},
    {"name": "adopt-smaller-graph", "flags": {"cuda-graph-max-bs": 128}, "adopt_if_win": True},
]


@pytest.mark.slow
def test_two_simulated_nodes_run_a_batch_side_by_side(tmp_path):
    nodes = [{**FAST_NODE, "name": "sim-a"}, {**FAST_NODE, "name": "sim-b", "seed": 4}]
    pb = load_playbook(sim_playbook(tmp_path, HYPS, nodes=nodes))
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb, playbook_path=str(tmp_path / "playbook.yaml")).id
    for i, h in enumerate(pb.hypotheses):
        store.upsert_hypothesis(cid, h, position=i)
    seen: list[tuple[float, str, dict]] = []
    deps = build_deps(
        pb,
        store,
        db_path=tmp_path / "campaign.db",
        events=lambda kind, data: seen.append((time.monotonic(), kind, data)),
    )
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 1000}
    graph.invoke({"campaign_id": cid}, cfg)

    data = store.show_json(cid)
    assert data["status"] == "finished"
    exps = {e["hypothesis"]: e for e in data["experiments"] if e["hypothesis"] != "baseline"}
    # the first two ran as a batch: one on each node, both in flight before either verdict
    assert (exps["flashinfer-allreduce-fusion"]["node"], exps["no-cuda-graph"]["node"]) == ("sim-a", "sim-b")
    order = [(k, d.get("name") or d.get("hypothesis")) for _, k, d in seen if k in ("hypothesis", "verdict")]
    assert order[:2] == [("hypothesis", "flashinfer-allreduce-fusion"), ("hypothesis", "no-cuda-graph")]
    # chunked-prefill is alone before the adopt barrier: the sequential path, first node
    assert exps["chunked-prefill"]["node"] == "sim-a" and exps["adopt-smaller-graph"]["node"] == "sim-a"
    assert (exps["flashinfer-allreduce-fusion"]["verdict"], exps["flashinfer-allreduce-fusion"]["failure_class"]) == (
        "dead_end",
        "jit_error",
    )
    assert exps["no-cuda-graph"]["verdict"] == "dead_end"  # -60 % throughput, measured on sim-b
    assert "slower" in exps["no-cuda-graph"]["reason"]
    # each candidate's baseline runs were measured on its own node (interleaved)
    for name in ("no-cuda-graph", "chunked-prefill"):
        runs = store.runs_for(exps[name]["id"])
        assert {r.node for r in runs} == {exps[name]["node"]}, name
        assert {r.side for r in runs} == {"baseline", "candidate"}
    assert graph.get_state(cfg).values["experiments_done"] == 4
    journal = Path(pb.journal).read_text()
    assert "node sim-b" in journal and "node sim-a" in journal
