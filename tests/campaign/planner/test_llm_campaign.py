"""A campaign driven by the LLM planner end to end, against the scripted OpenAI-compatible
server (real HTTP on 127.0.0.1) and the real simulated node."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from campaign.cli.wiring import build_deps
from campaign.loop.graph import build_graph
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook
from tests.fake_openai import FakeOpenAI, answer, proposal

KEY = "sk-test-NEVER-RECORD-THIS-0123456789"


@pytest.mark.slow
def test_llm_planner_drives_a_campaign_safely(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI() as server:
        server.script(
            proposal("graph-128; rm -rf /", flags={"cuda-graph-max-bs": 128}),  # bad name: rejected
            proposal("smaller-graph", flags={"cuda-graph-max-bs": "128; rm -rf /"}),  # shell metachars
            proposal("smaller-graph", flags={"cuda-graph-max-bs": 128}, rationale="frees KV memory"),
            answer({"analysis": "The smaller capture freed memory for the KV cache."}),
            proposal("huge-graph", flags={"cuda-graph-max-bs": 4096}),  # out of range
            proposal("nccl-tree", env={"NCCL_ALGO": "Tree"}),
            answer({"analysis": "Tree cannot be captured in a CUDA graph on this stack."}),
        )
        pb_path = sim_playbook(
            tmp_path,
            [],
            planner={
                "kind": "llm",
                "model": "fake-model",
                "base_url": server.url,
                "timeout_s": 10,
                "max_retries": 0,
                "max_proposals": 2,
            },
            knobs={
                "flags": {"cuda-graph-max-bs": {"type": "int", "min": 1, "max": 512}},
                "env": {"NCCL_ALGO": {"type": "choice", "choices": ["Ring", "Tree"]}},
            },
        )
        pb = load_playbook(pb_path)
        store = Store(tmp_path / "campaign.db")
        cid = store.create_campaign(pb.name, playbook=pb).id
        deps = build_deps(pb, store, db_path=tmp_path / "campaign.db", events=None)
        assert deps.planner is not None and deps.planner.kind == "llm"
        graph = build_graph(deps).compile(checkpointer=InMemorySaver())
        graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 500})
        assert server.remaining() == 0

    data = store.show_json(cid)
    assert data["status"] == "finished"
    got = {e["hypothesis"]: e for e in data["experiments"] if e["hypothesis"] != "baseline"}
    assert set(got) == {"smaller-graph", "nccl-tree"}
    assert got["nccl-tree"]["failure_class"] == "cuda_graph_incompatible"
    hyps = {h.name: h for h in store.list_hypotheses(cid)}
    assert hyps["smaller-graph"].source == "llm" and hyps["nccl-tree"].source == "llm"
    # every call recorded, the rejected ones with their reason; the planner's cost is in the view
    cost = store.planner_cost(cid)
    assert cost["calls"] == 7 and cost["rejections"] == 3
    view = store.view(cid)
    assert any(e.analysis and "KV cache" in e.analysis for e in view.experiments)
    journal = Path(pb.journal).read_text()
    assert "model-written" in journal
    # nothing the model wrote reached a process, and the key is nowhere on disk
    for e in store.list_experiments(cid):
        for kind, _seq, content in store.list_artifacts(e.id):
            assert "rm -rf" not in content
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    with sqlite3.connect(tmp_path / "campaign.db") as db:
        rejections = [r[0] for r in db.execute("select rejection from llm_calls where rejection is not null")]
    assert len(rejections) == 3 and any("4096" in r or "range" in r for r in rejections)
