"""Confounders from what the servers report, through the real loop: the simulated node
(a real HTTP server process per launch) behind a launcher that drops a flag or changes
a setting nobody asked for.  The requested configs look clean in both cases; only the
servers' own reports (`/server_info`, read through the engine profile) show it."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from campaign.cli.wiring import build_deps
from campaign.loop.graph import build_graph
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

QUIRKY = (
    "{python} -m tests.campaign.loop.quirky_node --ignore enable-mixed-chunk "
    "--also-when disable-radix-cache:schedule-policy=lpm -- "
    "--host {host} --port {port} --profile {profile} --cuda {cuda} --seed {seed} --time-scale {time_scale} "
    "--noise-pct {noise_pct} --model-path {model} --tp 8 --stream-interval 8 {flags}"
)

HYPS = [
    {
        "name": "ignored-flag",
        "rationale": "the server drops this flag without a word",
        "flags": {"enable-mixed-chunk": True},
    },
    {
        "name": "sneaky-server",
        "rationale": "with this flag the server also changes its schedule policy",
        "flags": {"disable-radix-cache": True},
    },
    # forcing the custom all-reduce over PCIe halves the speed: a decisive verdict, whatever the load
    {
        "name": "honoured-flag",
        "rationale": "custom all-reduce avoids NCCL's launch latency",
        "flags": {"enable-custom-all-reduce": True},
    },
]


@pytest.mark.slow
def test_servers_that_ignore_or_add_settings_confound_the_run(tmp_path: Path) -> None:
    path = sim_playbook(tmp_path, HYPS)
    pb = load_playbook(path)
    pb = pb.model_copy(update={"server": pb.server.model_copy(update={"command": QUIRKY})})
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb, playbook_path=str(path)).id
    for i, h in enumerate(pb.hypotheses):
        store.upsert_hypothesis(cid, h, position=i)
    deps = build_deps(pb, store, db_path=tmp_path / "campaign.db", events=None)
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 1000})

    data = store.show_json(cid)
    v = {e["hypothesis"]: e for e in data["experiments"]}
    assert set(v) == {"ignored-flag", "sneaky-server", "honoured-flag"}, data["experiments"]

    ignored = v["ignored-flag"]
    assert ignored["verdict"] == "inconclusive" and ignored["failure_class"] is None, ignored
    assert "confounded: the server ignored enable-mixed-chunk: asked for true" in ignored["reason"]
    assert [
        (r["key"], r["status"], r["baseline"], r["candidate"], r["requested"]) for r in ignored["reported_diff"]
    ] == [("enable-mixed-chunk", "ignored", False, False, True)]
    assert [(c["key"], c["change"], c["reported"]) for c in ignored["confounded_by"]] == [
        ("enable-mixed-chunk", "ignored", True)
    ]

    sneaky = v["sneaky-server"]
    assert sneaky["verdict"] == "inconclusive" and "confounded" in sneaky["reason"], sneaky
    assert "schedule-policy (fcfs -> lpm)" in sneaky["reason"]
    status = {r["key"]: r["status"] for r in sneaky["reported_diff"]}
    assert status == {"disable-radix-cache": "declared", "schedule-policy": "undeclared"}
    assert [(c["key"], c["reported"]) for c in sneaky["confounded_by"]] == [("schedule-policy", True)]

    honoured = v["honoured-flag"]
    assert honoured["verdict"] == "dead_end" and honoured["reason"].startswith("slower"), honoured
    assert honoured["confounded_by"] == []
    assert [(r["key"], r["status"]) for r in honoured["reported_diff"]] == [("enable-custom-all-reduce", "declared")]

    # a confounded run stops at the minimum of rounds: no number of repeats makes it a result
    for name in ("ignored-flag", "sneaky-server"):
        (exp,) = store.list_experiments(cid, hypothesis=name)
        assert {len(s.candidate) for s in store.level_samples(exp.id)} == {pb.verdict.repeats.min}

    journal = Path(pb.journal).read_text()
    assert "INCONCLUSIVE (confounded: enable-mixed-chunk)" in journal
    assert "IGNORED by the server (asked true)" in journal
    assert "INCONCLUSIVE (confounded: schedule-policy)" in journal
    assert "**What the servers report**" in journal
    assert "The candidate's server ignored `enable-mixed-chunk`: asked for true, it reports false" in journal
