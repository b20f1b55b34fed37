"""The proposal schema carries the knob space (issue 15) and long runs of bad answers
stay rejections (issue 14): both against the real planner over real HTTP."""

from __future__ import annotations

from campaign.planner.llm import LlmPlanner
from campaign.planner.prompt import estimate_tokens, proposal_messages
from campaign.planner.schemas import Rejection, proposal_schema
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.fake_openai import FakeOpenAI, proposal, text


def _items(schema: dict, key: str) -> dict[str, dict]:
    """name -> value schema of a `[{"name", "value"}]` property."""
    return {
        o["properties"]["name"]["enum"][0]: o["properties"]["value"]
        for o in schema["properties"][key]["items"]["anyOf"]
    }


def test_the_schema_names_every_knob_with_its_bounds_and_choices() -> None:
    schema = proposal_schema(make_playbook().knobs)
    flags, env = _items(schema, "flags"), _items(schema, "env")
    assert set(flags) == {
        "cuda-graph-max-bs",
        "attention-backend",
        "enable-torch-compile",
        "mem-fraction-static",
        "speculative-algorithm",
        "tp-size",
    }
    assert flags["cuda-graph-max-bs"] == {"type": "integer", "minimum": 1, "maximum": 512}
    assert flags["mem-fraction-static"] == {"type": "number", "minimum": 0.5, "maximum": 0.95}
    assert flags["attention-backend"] == {"enum": ["flashinfer", "triton", "fa3"]}
    assert flags["enable-torch-compile"] == {"type": "boolean"}
    assert flags["speculative-algorithm"]["pattern"].startswith("^[A-Za-z0-9")
    assert env == {
        "NCCL_ALGO": {"enum": ["Ring", "Tree"]},
        "NCCL_MIN_NCHANNELS": {"type": "integer", "minimum": 1, "maximum": 32},
    }
    assert schema["properties"]["unset_flags"]["items"]["enum"] == sorted(flags)
    assert schema["properties"]["patch"] == {"type": "null", "description": "patches are not allowed"}
    # strict structured output: every object closed and fully required
    for item in schema["properties"]["flags"]["items"]["anyOf"]:
        assert item["additionalProperties"] is False and item["required"] == ["name", "value"]
    assert schema["required"] == list(schema["properties"])


def test_allowed_flags_narrow_the_enum_and_an_empty_space_allows_no_entries() -> None:
    pb = make_playbook()
    assert set(_items(proposal_schema(pb.knobs, ["tp-size"]), "flags")) == {"tp-size"}
    empty = proposal_schema(pb.knobs.model_copy(update={"flags": {}, "env": {}}))
    assert empty["properties"]["flags"]["maxItems"] == 0 and empty["properties"]["env"]["maxItems"] == 0


def test_the_request_sends_the_knob_schema_and_validation_still_runs(server: FakeOpenAI) -> None:
    """An endpoint that ignores the schema (no constrained decoding): the answer is still checked."""
    server.script(
        proposal("huge", flags={"cuda-graph-max-bs": 4096}), proposal("fa3", flags={"attention-backend": "fa3"})
    )
    pb = make_playbook()
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx())
    assert out.hypothesis is not None and "above the maximum 512" in out.rejections[0].reason
    sent = server.chat_requests()[0].body["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert _items(sent["schema"], "flags")["cuda-graph-max-bs"]["maximum"] == 512


def test_a_long_run_of_long_bad_answers_is_rejections_not_a_context_error(server: FakeOpenAI) -> None:
    """28 long answers in a row at the default 6000-token budget: before, the feedback of every
    rejection went back to the model and the prompt outgrew planner.context_tokens (a UserError)."""
    junk = "[/bold] " + "lorem ipsum dolor " * 3000
    server.script(*[text(junk) for _ in range(28)])
    pb = make_playbook(max_rejections=27, context_tokens=6000)
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx())
    assert out.hypothesis is None and out.exhausted and len(out.rejections) == 28
    assert all("not valid JSON" in r.reason for r in out.rejections)
    assert max(len(r.prompt_text()) for r in server.chat_requests()) < 6000 * 4


def test_feedback_keeps_the_newest_rejections_within_budget() -> None:
    ctx = make_ctx()
    rejections = [Rejection(reason=f"reason {i} " + "x" * 2000, raw="y" * 4000) for i in range(40)]
    msgs = proposal_messages(ctx, ctx.playbook.knobs, rejections, 6000)
    text_ = "\n".join(m["content"] for m in msgs)
    assert estimate_tokens(msgs) <= 6000
    assert "reason 39" in text_ and "reason 36" not in text_ and "37 earlier proposals were rejected" in text_


def test_one_long_value_is_a_short_rejection_not_a_context_error(server: FakeOpenAI) -> None:
    """The reason used to quote the whole value, and went back to the model in full."""
    long_value = "fa" * 20_000
    server.script(
        proposal("long", flags={"attention-backend": long_value}),
        proposal("x" * 10, flags={"tp-si" + "z" * 20_000: 4}),
        proposal("fa3", flags={"attention-backend": "fa3"}),
    )
    pb = make_playbook(max_rejections=3, context_tokens=6000)
    out = LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url).propose(make_ctx())
    assert out.hypothesis is not None and len(out.rejections) == 2
    assert all(len(r.reason) <= 400 for r in out.rejections)
    assert "is not one of" in out.rejections[0].reason and "not in the knob space" in out.rejections[1].reason
