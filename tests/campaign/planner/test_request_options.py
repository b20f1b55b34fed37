"""What the playbook's planner section puts in each request (issue 15: a small local model):
max_tokens, seed, the schema or none, bounded text, revisit_of narrowed to reopened dead ends;
and an answer cut off at max_tokens is refused with that reason."""

from __future__ import annotations

import json

from campaign.planner.llm import LlmPlanner
from campaign.planner.schemas import analysis_schema, proposal_schema, with_reopened
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.fake_openai import FakeOpenAI, Reply, answer, proposal


def _cut(content: str) -> Reply:
    """A completion the endpoint stopped at its token limit."""
    return Reply(
        body={
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 64, "total_tokens": 164},
        }
    )


def test_max_tokens_seed_and_the_schema_go_out_as_the_playbook_says(server: FakeOpenAI) -> None:
    pb = make_playbook(max_tokens=64, seed=7, text_max_chars=100)
    server.script(proposal("fa3", flags={"attention-backend": "fa3"}))
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx(pb))
    assert out.hypothesis is not None
    body = server.chat_requests()[0].body
    assert body is not None and body["max_tokens"] == 64 and body["seed"] == 7
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["rationale"]["maxLength"] == 100
    assert schema["properties"]["expected_effect"]["maxLength"] == 100
    assert schema["properties"]["flags"]["maxItems"] == len(pb.knobs.flags)  # each knob at most once
    assert schema["properties"]["revisit_of"] == {"type": "null", "description": "no dead end is reopened"}


def test_unstructured_sends_no_schema_and_still_validates(server: FakeOpenAI) -> None:
    pb = make_playbook(structured=False)
    server.script(
        proposal("huge", flags={"cuda-graph-max-bs": 4096}), proposal("fa3", flags={"attention-backend": "fa3"})
    )
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx(pb))
    assert out.hypothesis is not None and "above the maximum 512" in out.rejections[0].reason
    for request in server.chat_requests():
        assert request.body is not None
        assert "response_format" not in request.body and "max_tokens" not in request.body and "seed" not in request.body
    assert all(not c.structured for c in out.calls)


def test_an_answer_cut_off_at_max_tokens_is_refused_with_that_reason(server: FakeOpenAI) -> None:
    pb = make_playbook(max_tokens=64)
    server.script(
        _cut('{"name": "long", "rationale": "and so on and so on'),
        proposal("fa3", flags={"attention-backend": "fa3"}),
        _cut('{"analysis": "The run was'),
    )
    planner = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url)
    ctx = make_ctx(pb)
    out = planner.propose(ctx)
    assert out.hypothesis is not None
    assert (
        out.rejections[0].reason
        == "answer cut off at planner.max_tokens (64) before its JSON closed (fix: a shorter answer)"
    )
    analysis = planner.analyze(ctx, ctx.view.experiments[0])
    assert analysis.text is None and "cut off at planner.max_tokens (64)" in (analysis.calls[-1].rejection or "")


def test_the_analysis_schema_is_bounded_when_asked(server: FakeOpenAI) -> None:
    assert "maxLength" not in analysis_schema()["properties"]["analysis"]
    assert analysis_schema(300)["properties"]["analysis"]["maxLength"] == 300
    pb = make_playbook(text_max_chars=300)
    server.script(answer({"analysis": "Tree loses at C=64."}))
    planner = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url)
    ctx = make_ctx(pb)
    assert planner.analyze(ctx, ctx.view.experiments[0]).text == "Tree loses at C=64."
    body = server.chat_requests()[0].body
    assert body is not None
    assert body["response_format"]["json_schema"]["schema"]["properties"]["analysis"]["maxLength"] == 300


def test_revisit_of_names_only_reopened_dead_ends() -> None:
    base = proposal_schema(make_playbook().knobs)
    assert "maxLength" not in base["properties"]["rationale"]  # unbounded unless asked (OpenAI strict)
    narrowed = with_reopened(base, ["nccl-tree"])
    assert narrowed["properties"]["revisit_of"]["enum"] == ["nccl-tree", None]
    assert base["properties"]["revisit_of"] == {
        "type": ["string", "null"],
        "description": "name of a reopened dead end, or null",
    }
    json.dumps(narrowed)  # still plain JSON


def test_a_reopened_dead_end_is_in_the_request_schema(server: FakeOpenAI) -> None:
    pb = make_playbook()
    server.script(proposal("nccl-tree-again", env={"NCCL_ALGO": "Tree"}, revisit_of="nccl-tree"))
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(
        make_ctx(pb, reopened=["nccl-tree"])
    )
    assert out.hypothesis is not None
    body = server.chat_requests()[0].body
    assert body is not None
    assert body["response_format"]["json_schema"]["schema"]["properties"]["revisit_of"]["enum"] == ["nccl-tree", None]


def test_max_changes_bounds_each_list_and_validation_counts_them_all(server: FakeOpenAI) -> None:
    pb = make_playbook(max_changes=1)
    schema = proposal_schema(pb.knobs, max_changes=1)
    assert [schema["properties"][k]["maxItems"] for k in ("flags", "env", "unset_flags")] == [1, 1, 1]
    server.script(
        proposal("two", flags={"attention-backend": "fa3"}, env={"NCCL_ALGO": "Ring"}),
        proposal("one", flags={"attention-backend": "fa3"}),
    )
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx(pb))
    assert out.hypothesis is not None and out.hypothesis.name == "one"
    assert out.rejections[0].reason == "changes 2 settings; planner.max_changes allows 1"
    sent = server.chat_requests()[0].body
    assert sent is not None and sent["response_format"]["json_schema"]["schema"]["properties"]["flags"]["maxItems"] == 1
