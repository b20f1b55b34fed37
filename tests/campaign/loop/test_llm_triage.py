"""The LLM's crash triage in the loop: asked only about a log no signature matched, its
answer kept as a suggestion beside the rule table's class (never replacing it), every
call recorded; with no LLM planner nothing is asked and nothing pretends it was."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from campaign.domain.models import FailureClass
from campaign.loop.planner_bridge import triage_with_planner
from campaign.planner.llm import LlmPlanner
from campaign.store import Store
from tests.campaign.planner.conftest import make_playbook
from tests.fake_openai import FakeOpenAI, answer, proposal
from tools.server.triage import classify

ODD_LOG = ["[2025-01-01 00:00:00] decode out of sync for 900 s, nothing scheduled", "Killed"]
OOM_LOG = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]


def _deps(tmp_path: Path, planner: object | None) -> tuple[SimpleNamespace, str]:
    pb = make_playbook()
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    return SimpleNamespace(planner=planner, store=store, playbook=pb), cid


def test_an_unmatched_log_gets_the_models_suggestion_beside_its_class(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        server.script(answer({"failure_class": "hang"}))
        pb = make_playbook(base_url=server.url)
        deps, cid = _deps(tmp_path, LlmPlanner(pb.planner, pb.knobs, base_url=server.url))
        failure = triage_with_planner(deps, cid, classify(137, ODD_LOG), ODD_LOG)
        asked = server.chat_requests()
    assert len(asked) == 1 and "decode out of sync" in asked[0].prompt_text()
    assert failure.failure_class == FailureClass.exited and not failure.matched  # the class is the rules'
    assert failure.suggested_class == FailureClass.hang
    assert "the LLM suggests hang (a guess: no signature matched)" in failure.summary
    assert [c.purpose for c in deps.store.planner_calls(cid)] == ["triage"]
    assert '"suggested_class":"hang"' in failure.model_dump_json()  # what show --json and the journal read


def test_a_signature_is_never_sent_to_the_model(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        pb = make_playbook(base_url=server.url)
        deps, cid = _deps(tmp_path, LlmPlanner(pb.planner, pb.knobs, base_url=server.url))
        failure = triage_with_planner(deps, cid, classify(1, OOM_LOG), OOM_LOG)
        assert server.chat_requests() == []
    assert failure.failure_class == FailureClass.oom and failure.suggested_class is None
    assert deps.store.planner_calls(cid) == []


def test_without_an_llm_planner_nothing_is_asked_or_recorded(tmp_path: Path) -> None:
    deps, cid = _deps(tmp_path, None)
    before = classify(137, ODD_LOG)
    after = triage_with_planner(deps, cid, before, ODD_LOG)
    assert after == before and after.suggested_class is None and "LLM" not in after.summary
    assert deps.store.planner_calls(cid) == []


def _campaign(tmp_path: Path, server: FakeOpenAI, recursion_limit: int, **playbook: object):
    """A simulated campaign with the scripted model as planner, run through the real graph."""
    from langgraph.checkpoint.memory import InMemorySaver

    from campaign.cli.wiring import build_deps
    from campaign.loop.graph import build_graph
    from campaign.playbook.load import load_playbook
    from tests.campaign.sim_playbook import sim_playbook

    pb = load_playbook(
        sim_playbook(
            tmp_path,
            [],
            planner={
                "kind": "llm",
                "model": "fake-model",
                "base_url": server.url,
                "timeout_s": 10,
                "max_retries": 0,
                "max_proposals": 1,
                "analyze": False,
            },
            **playbook,
        )
    )
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb).id
    deps = build_deps(pb, store, db_path=tmp_path / "campaign.db", events=None)
    graph = build_graph(deps).compile(checkpointer=InMemorySaver())
    graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": recursion_limit})
    return pb, store, cid


def test_a_campaign_asks_the_model_about_a_crash_no_rule_knows(tmp_path: Path, monkeypatch) -> None:
    """Through the loop on the simulated node: the model proposes tp-size 16 on 8 GPUs,
    which dies with a CUDA error no rule knows; the model is asked about that log once,
    its answer is in show --json and the journal as a suggestion, and the experiment's
    class stays the rules' `exited`."""

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-NEVER-RECORD-THIS-0123456789")
    with FakeOpenAI() as server:
        server.script(proposal("tp-16", flags={"tp-size": 16}), answer({"failure_class": "nccl_error"}))
        pb, store, cid = _campaign(
            tmp_path, server, 200, knobs={"flags": {"tp-size": {"type": "int", "min": 1, "max": 16}}}
        )
        asked = server.chat_requests()
    assert len(asked) == 2 and "invalid device ordinal" in asked[1].prompt_text()
    (exp,) = [e for e in store.show_json(cid)["experiments"] if e["hypothesis"] == "tp-16"]
    assert exp["failure_class"] == "exited" and exp["suggested_class"] == "nccl_error"
    journal = Path(pb.journal).read_text()
    assert "the LLM suggests nccl_error (a guess: no signature matched)" in journal


def test_a_baseline_that_dies_unknown_carries_the_suggestion_in_the_halt_reason(tmp_path: Path, monkeypatch) -> None:
    """The baseline itself dies with a log no rule knows: the campaign fails, and the one
    line the user reads says what the model suggests, marked as a guess."""

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-NEVER-RECORD-THIS-0123456789")
    with FakeOpenAI() as server:
        server.script(answer({"failure_class": "environment"}))
        _pb, store, cid = _campaign(tmp_path, server, 50, baseline={"flags": {"tp-size": 16}})
        asked = server.chat_requests()
    assert len(asked) == 1 and "invalid device ordinal" in asked[0].prompt_text()
    reason = store.show_json(cid)["halt_reason"]
    assert reason.startswith("the baseline does not run: exited:")
    assert "the LLM suggests environment (a guess: no signature matched)" in reason
