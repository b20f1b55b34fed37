"""A patch hypothesis that reaches the graph without a source tree (added at review or
by the planner) is a dead end of class patch_refused: it is never measured on the
unpatched engine under the patch's name (the bug this replaced)."""

from __future__ import annotations

from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from campaign.cli.wiring import build_deps
from campaign.loop.graph import build_graph
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

SINGLE = {
    "single_stream": {
        "concurrency": [1],
        "prompts": "fixed",
        "output_tokens": 32,
        "requests_per_level": 2,
        "warmup_requests": 0,
    }
}


def test_a_patch_without_a_source_tree_is_refused_not_measured(tmp_path: Path) -> None:
    pb = load_playbook(
        sim_playbook(tmp_path, [], workloads=SINGLE, review={"before_patch": False}, node={"time_scale": 50})
    )
    (tmp_path / "p.diff").write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb, playbook_path=str(tmp_path / "playbook.yaml")).id
    store.upsert_hypothesis(cid, HypothesisSpec(name="added", patch=str(tmp_path / "p.diff")), source="review")
    deps = build_deps(pb, store, db_path=tmp_path / "campaign.db", events=None)
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 200})
    [exp] = [e for e in store.show_json(cid)["experiments"] if e["hypothesis"] == "added"]
    assert exp["verdict"] == "dead_end" and exp["failure_class"] == "patch_refused"
    assert "no source tree" in exp["reason"] and exp["metrics"] == {}
    assert not list((tmp_path / "nodes").rglob("added-candidate*.log"))  # never launched
