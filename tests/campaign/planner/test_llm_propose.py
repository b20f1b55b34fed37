"""LlmPlanner.propose against the scripted server: real HTTP, the real openai client."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from campaign.cli.wiring import local_source_tree as PatchManager
from campaign.domain.records import ExperimentView
from campaign.planner.base import PlannerContext
from campaign.planner.llm import LlmPlanner
from campaign.planner.queue import propose_or_queue
from campaign.playbook.schema import PatchPolicy, Playbook
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.campaign.planner.test_patchcheck import GOOD, git_repo
from tests.fake_openai import FakeOpenAI, Reply, answer, proposal, text

GOOD_REPLY = dict(
    name="fa3-attention", flags={"attention-backend": "fa3", "cuda-graph-max-bs": 192.0}, env={"NCCL_MIN_NCHANNELS": 8}
)


def planner(server: FakeOpenAI, pb: Playbook | None = None, **spec: object) -> LlmPlanner:
    playbook = pb or make_playbook(**spec)
    return LlmPlanner(playbook.planner, playbook.knobs, api_key=API_KEY, base_url=server.url)


def test_a_valid_proposal_is_returned_and_recorded(server: FakeOpenAI) -> None:
    server.script(proposal(**GOOD_REPLY))
    ctx = make_ctx()
    out = planner(server).propose(ctx)
    h = out.hypothesis
    assert h is not None and out.source == "llm" and not out.exhausted and not out.needs_approval
    assert h.flags == {"attention-backend": "fa3", "cuda-graph-max-bs": 192} and h.env == {"NCCL_MIN_NCHANNELS": "8"}
    assert out.proposal is not None and out.proposal.expected_effect == "+3% at C=64"
    [req] = server.chat_requests()
    assert req.headers["Authorization"] == f"Bearer {API_KEY}"
    assert req.body["response_format"]["type"] == "json_schema"
    assert req.body["response_format"]["json_schema"]["strict"] is True
    assert req.body["model"] == "fake-model"
    assert "slower by 4.1% at C=64" in req.prompt_text()
    [call] = out.calls
    assert (call.purpose, call.prompt_tokens, call.completion_tokens) == ("propose", 120, 40)
    assert call.prompt_hash == hashlib.sha256(json.dumps(req.body["messages"], sort_keys=True).encode()).hexdigest()
    assert json.loads(call.output_json or "")["name"] == "fa3-attention" and call.rejection is None
    assert call.latency_ms > 0


BAD_CASES = {
    "invalid_json": (text("Sure! I suggest raising the batch size."), "not valid JSON"),
    "schema_violation": (answer({"name": 5, "flags": [], "confidence": 0.9}), "violates the schema"),
    "out_of_range": (proposal("bigger", flags={"cuda-graph-max-bs": 4096}), "above the maximum 512"),
    "shell_metacharacters": (proposal("spec", flags={"speculative-algorithm": "1; rm -rf /"}), "unsafe characters"),
    "newline": (proposal("spec", flags={"speculative-algorithm": "a\nb"}), "unsafe characters"),
    "option_injection": (proposal("spec", flags={"speculative-algorithm": "--trust-remote-code"}), "start with '-'"),
    "undeclared_flag": (
        proposal("trust", flags={"trust-remote-code": True}),
        "'trust-remote-code' is not in the knob space",
    ),
    "undeclared_env": (
        proposal("preload", env={"LD_PRELOAD": "/tmp/evil.so"}),
        "'LD_PRELOAD' is not in the knob space",
    ),
    "dead_end": (proposal("tree-v2", env={"NCCL_ALGO": "Tree"}), "repeats dead end 'nccl-tree'"),
    "duplicate_name": (proposal("nccl-ring", env={"NCCL_ALGO": "Ring"}), "the name 'nccl-ring' is already"),
    "duplicate_change": (proposal("graphs-256", flags={"cuda-graph-max-bs": 256}), "same change as 'cg-bs-256'"),
    "patch_without_policy": (proposal("p", patch=GOOD), "patches are not allowed"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_a_bad_answer_is_rejected_recorded_and_the_model_asked_again(server: FakeOpenAI, case: str) -> None:
    bad, reason = BAD_CASES[case]
    server.script(bad, proposal(**GOOD_REPLY))
    out = planner(server).propose(make_ctx())
    assert out.hypothesis is not None and out.hypothesis.name == "fa3-attention"
    [rejection] = out.rejections
    assert reason in rejection.reason
    assert [c.rejection is not None for c in out.calls] == [True, False]
    assert reason in (out.calls[0].rejection or "")
    first, second = server.chat_requests()
    assert f"Rejected: {rejection.reason}" in second.prompt_text()
    assert "Rejected:" not in first.prompt_text()
    # nothing of the refused answer reaches the runnable hypothesis
    assert (
        "rm -rf" not in out.hypothesis.model_dump_json() and "trust-remote-code" not in out.hypothesis.model_dump_json()
    )


def test_after_max_rejections_the_planner_gives_up_and_the_queue_takes_over(server: FakeOpenAI) -> None:
    bad = [proposal("x", flags={"cuda-graph-max-bs": 0}) for _ in range(3)]
    server.script(*bad)
    llm = planner(server, max_rejections=2)
    ctx = make_ctx()
    out = llm.propose(ctx)
    assert out.hypothesis is None and out.exhausted and len(out.rejections) == 3 and len(out.calls) == 3
    assert len(server.chat_requests()) == 3 and "gave up after 3" in out.note
    server.script(*bad)
    fallback = propose_or_queue(llm, ctx)
    assert fallback.hypothesis is not None and fallback.hypothesis.name == "nccl-ring"
    assert fallback.source == "playbook" and len(fallback.calls) == 3


def test_a_reopened_dead_end_may_be_proposed_again(server: FakeOpenAI) -> None:
    server.script(proposal("nccl-tree", env={"NCCL_ALGO": "Tree"}, revisit_of="nccl-tree"))
    ctx = make_ctx()
    ctx.view.dead_ends[0].reopened = True  # the driver changed since
    out = planner(server).propose(ctx)
    assert out.hypothesis is not None and out.hypothesis.env == {"NCCL_ALGO": "Tree"} and out.rejections == []


def test_the_proposal_budget_stops_the_planner_without_a_call(server: FakeOpenAI) -> None:
    ctx = make_ctx()
    ctx.view.experiments += [ExperimentView(id=f"l{i}", hypothesis=f"llm-{i}", source="llm") for i in range(2)]
    out = planner(server, max_proposals=2).propose(ctx)
    assert out.exhausted and out.hypothesis is None and server.chat_requests() == []


def test_plain_json_fallback_when_the_endpoint_refuses_response_format(server: FakeOpenAI) -> None:
    from tests.fake_openai import status

    fenced = "Here you go:\n```json\n" + (proposal(**GOOD_REPLY).content or "") + "\n```"
    server.script(status(400, "response_format json_schema is not supported"), text(fenced), proposal(**GOOD_REPLY))
    llm = planner(server)
    out = llm.propose(make_ctx())
    assert out.hypothesis is not None and out.hypothesis.name == "fa3-attention"
    first, second = server.chat_requests()
    assert "response_format" in first.body and "response_format" not in second.body
    assert out.calls[0].error and "HTTP 400" in out.calls[0].error and out.calls[1].structured is False
    llm.propose(make_ctx(queue=[]))  # later calls go straight to plain JSON
    assert "response_format" not in server.chat_requests()[2].body


def patch_playbook(repo: Path, allowed: list[str]) -> Playbook:
    pb = make_playbook()
    pb.knobs.patches = PatchPolicy(repo=str(repo), allowed_paths=allowed)
    return pb


def test_a_patch_on_an_allowed_path_needs_approval_and_is_not_applied(server: FakeOpenAI, tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    pb = patch_playbook(repo, ["python/sglang/srt/layers"])
    forbidden = "--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"  # applies, but not allowed
    server.script(proposal("chunk-setup", patch=forbidden), proposal("chunk-4", patch=GOOD))
    out = planner(server, pb).propose(
        PlannerContext(playbook=pb, view=make_ctx().view, queue=pb.hypotheses, source=PatchManager)
    )
    assert "writes 'setup.py', outside the allowed paths" in out.rejections[0].reason
    assert out.hypothesis is not None and out.hypothesis.patch == GOOD and out.needs_approval
    assert (
        subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout == ""
    )


def test_unknown_failure_of_the_script_is_loud(server: FakeOpenAI) -> None:
    from campaign.planner.base import PlannerUnavailable

    server.script(Reply(status=418, body={"error": {"message": "teapot"}}))
    with pytest.raises(PlannerUnavailable, match="HTTP 418"):
        planner(server).propose(make_ctx())
