"""The real LlmPlanner against a hostile OpenAI-compatible endpoint (raw HTTP on 127.0.0.1).

Every answer shape ends in exactly one of three ways, with every call recorded and
no other exception: the endpoint is unusable (`PlannerUnavailable`, one line, after
`max_retries` tries), every proposal is rejected (the planner gives up, each reason
one line), or a hypothesis comes back that passes the knob checks again here.  No
unsafe value is ever returned, and the API key is in no record.
"""

from __future__ import annotations

import gzip
import json

import pytest

from campaign.planner.base import PlannerUnavailable
from campaign.planner.knobs import HYPOTHESIS_NAME, check_setting
from campaign.planner.llm import LlmPlanner
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.hostile_openai import (
    HostileServer,
    Shape,
    answer,
    broken_chunks,
    completion_body,
    content,
    error_status,
    headers_then_silence,
    json_body,
    proposal,
    raw_body,
    reset,
    silence,
    slow_drip,
    truncated,
)

DOWN, REJECTED, OK = "down", "rejected", "ok"
GOOD = {"attention-backend": "fa3"}
COMPLETION = json.dumps(completion_body('{"analysis": "fine"}')).encode()
HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"

# ---------------------------------------------------------------- the endpoint itself
TRANSPORT: dict[str, Shape] = {
    "http_400": error_status(400),
    "http_401": error_status(401),
    "http_403": error_status(403),
    "http_404": error_status(404),
    "http_408": error_status(408),
    "http_409": error_status(409),
    "http_413": error_status(413),
    "http_418": error_status(418),
    "http_422": error_status(422),
    "http_429_huge_retry_after": error_status(429, {"retry-after": "100000"}),
    "http_500": error_status(500),
    "http_502_html": raw_body(HTML, status=502, ctype="text/html"),
    "http_503": error_status(503),
    "http_504": error_status(504),
    "redirect_to_closed_port": raw_body(
        b"", status=302, headers={"location": "http://127.0.0.1:9/v1/chat/completions"}
    ),
    "http_204": raw_body(b"", status=204),
    "html_page": raw_body(HTML, ctype="text/html"),
    "plain_text": raw_body(b"OK", ctype="text/plain"),
    "empty_body": raw_body(b""),
    "invalid_json": raw_body(b'{"choices": [{"message": '),
    "json_array": json_body([1, 2, 3]),
    "json_string": json_body("hello"),
    "json_null": json_body(None),
    "json_number": json_body(42),
    "empty_object": json_body({}),
    "choices_string": json_body(completion_body("x", choices="not a list")),
    "choices_null": json_body(completion_body("x", choices=None)),
    "choices_empty": json_body(completion_body("x", choices=[])),
    "choice_null": json_body(completion_body("x", choices=[None])),
    "choice_string": json_body(completion_body("x", choices=["x"])),
    "message_null": json_body(completion_body("x", choices=[{"index": 0, "message": None}])),
    "message_string": json_body(completion_body("x", choices=[{"index": 0, "message": "hi"}])),
    "content_number": json_body(completion_body(42)),
    "content_object": json_body(completion_body({"name": "x"})),
    "content_list_of_numbers": json_body(completion_body([1, 2])),
    "error_object_with_200": json_body({"error": {"message": "model overloaded\nretry later"}}),
    "not_utf8": raw_body(b'{"choices": "\xff\xfe\xfa"}'),
    "deeply_nested": raw_body(b"[" * 100_000 + b"]" * 100_000),
    "huge_body_3mb": raw_body(b'{"pad": "' + b"x" * 3_000_000 + b'"}'),
    "truncated_body": truncated(COMPLETION, 40),
    "slow_drip": slow_drip(COMPLETION, 0.05),
    "silence": silence(10),
    "headers_then_silence": headers_then_silence(10),
    "connection_reset": reset(),
    "broken_chunking": broken_chunks(),
    "gzip_garbage": raw_body(b"this is not gzip", headers={"content-encoding": "gzip"}),
    "gzip_bomb_like": raw_body(
        gzip.compress(b'{"pad": "' + b"0" * 5_000_000 + b'"}'), headers={"content-encoding": "gzip"}
    ),
    "sse_stream_unasked": raw_body(b'data: {"choices": []}\n\ndata: [DONE]\n\n', ctype="text/event-stream"),
}

# ---------------------------------------------------------------- the model's text
NAN_PROPOSAL = (
    '{"name": "nan-mem", "rationale": "", "expected_effect": "", "flags": '
    '[{"name": "mem-fraction-static", "value": NaN}], "env": [], "unset_flags": [], '
    '"patch": null, "revisit_of": null}'
)
BAD_TEXT: dict[str, Shape] = {
    "prose": content("Sure! I would raise the batch size."),
    "json_array_text": content("[1, 2]"),
    "missing_name": answer({"rationale": "x", "flags": []}),
    "extra_field": answer({"name": "x", "flags": [], "confidence": 0.9}),
    "flags_as_string": proposal("x", flags="--tp 8"),
    "undeclared_flag": proposal("trust", flags={"trust-remote-code": True}),
    "out_of_range": proposal("big", flags={"cuda-graph-max-bs": 4096}),
    "nan": content(NAN_PROPOSAL),
    "infinity": content(NAN_PROPOSAL.replace("NaN", "1e400")),
    "huge_int": proposal("huge", flags={"cuda-graph-max-bs": 10**30}),
    "bool_for_int": proposal("b", flags={"cuda-graph-max-bs": True}),
    "object_value": proposal("o", flags={"cuda-graph-max-bs": {"a": 1}}),
    "choice_not_listed": proposal("c", flags={"attention-backend": "flash-evil"}),
    "shell_metachars": proposal("s", flags={"speculative-algorithm": "EAGLE;id"}),
    "command_substitution_env": proposal("s", env={"NCCL_ALGO": "$(id)"}),
    "option_injection": proposal("s", flags={"speculative-algorithm": "--trust-remote-code"}),
    "newline_value": proposal("s", flags={"speculative-algorithm": "a\nb"}),
    "bidi_value": proposal("s", flags={"speculative-algorithm": "EAGLE\u202e3"}),
    "bidi_name": proposal("x\u202egnp.exe", flags=GOOD),
    "zero_width_value": proposal("s", flags={"speculative-algorithm": "EA\u200bGLE"}),
    "fullwidth_digits": proposal("s", flags={"cuda-graph-max-bs": "\uff11\uff12\uff18"}),
    "undeclared_env": proposal("p", env={"LD_PRELOAD": "/tmp/evil.so"}),
    "lowercase_env": proposal("p", env={"nccl_algo": "Ring"}),
    "markup_name": proposal("[bold]x[/bold]", flags=GOOD),
    "patch_not_allowed": proposal("p", patch="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
    "revisit_unknown": proposal("r", flags=GOOD, revisit_of="never-ran"),
    "duplicate_of_queued": proposal("ring-again", env={"NCCL_ALGO": "Ring"}),
    "dead_end_repeat": proposal("tree-again", env={"NCCL_ALGO": "Tree"}),
    "changes_nothing": proposal("same", flags={"tp-size": 8}),
    "name_given_twice": proposal("t", flags=[{"name": "tp-size", "value": 4}, {"name": "tp-size", "value": 2}]),
    "unset_unknown": proposal("u", unset_flags=["trust-remote-code"]),
    "set_and_unset": proposal("u", flags={"tp-size": 4}, unset_flags=["tp-size"]),
    "rationale_too_long": proposal("long", flags=GOOD, rationale="why " * 2000),
    "long_junk_100kb": content("[/bold] " + "lorem ipsum " * 9000),
    "deeply_nested_text": content("[" * 200_000),
    "nested_object_text": content('{"name": ' * 50_000 + '"x"' + "}" * 50_000),
    "unclosed_fences": content("```json\n{" * 20_000),
    "refusal": json_body(completion_body(None, choices=[{"index": 0, "message": {"content": None, "refusal": "no"}}])),
    "message_without_content": json_body(completion_body(None, choices=[{"index": 0, "message": {}}])),
    "cut_by_length": json_body(
        completion_body('{"name": "x", "flags": [{"name": "tp-si', choices=None)
        | {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"content": '{"name": "x", "flags": [{"name": "tp-si'},
                }
            ]
        }
    ),
}

# ---------------------------------------------------------------- accepted, made safe
ACCEPTED: dict[str, Shape] = {
    "markup_in_rationale": proposal("fa3", flags=GOOD, rationale="[/bold] [link=file:///etc/passwd]x[/link] [red"),
    "bidi_in_rationale": proposal("fa3", flags=GOOD, rationale="fast \u202eevil\u202c path"),
    "fenced_with_prose": content(
        "Here you go:\n```json\n"
        + json.dumps(
            {
                "name": "fa3",
                "rationale": "",
                "expected_effect": "",
                "flags": [{"name": "attention-backend", "value": "fa3"}],
                "env": [],
                "unset_flags": [],
                "patch": None,
                "revisit_of": None,
            }
        )
        + "\n```\nGood luck."
    ),
    "content_parts": json_body(
        completion_body([{"type": "text", "text": json.dumps({"name": "fa3", "flags": {"attention-backend": "fa3"}})}])
    ),
    "plain_map_form": answer({"name": "fa3", "flags": {"attention-backend": "fa3"}}),
    "key_echoed": proposal("fa3", flags=GOOD, rationale=f"my key is {API_KEY}"),
    "int_as_string": proposal("cg-128", flags={"cuda-graph-max-bs": "128"}),
    "html_content_type_valid_json": raw_body(
        json.dumps(completion_body(json.dumps({"name": "fa3", "flags": GOOD}))).encode(), ctype="text/html"
    ),
    "usage_garbage": json_body(
        completion_body(
            json.dumps({"name": "fa3", "flags": GOOD}), usage={"prompt_tokens": "many", "completion_tokens": -5}
        )
    ),
    "extra_top_level_fields": json_body(
        completion_body(json.dumps({"name": "fa3", "flags": GOOD}), system_fingerprint={"x": [1]}, weird=None)
    ),
}

CASES = (
    [(k, s, DOWN) for k, s in TRANSPORT.items()]
    + [(k, s, REJECTED) for k, s in BAD_TEXT.items()]
    + [(k, s, OK) for k, s in ACCEPTED.items()]
)


def test_the_suite_covers_at_least_sixty_shapes() -> None:
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


def _planner(url: str) -> LlmPlanner:
    pb = make_playbook(timeout_s=1, max_retries=1, max_rejections=1)
    return LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=url)


def _assert_safe(h, pb) -> None:  # type: ignore[no-untyped-def]
    """What a runnable hypothesis must be, checked again from scratch."""
    assert HYPOTHESIS_NAME.match(h.name) and h.patch is None
    for name, value in h.flags.items():
        assert check_setting("flag", name, value, pb.knobs.flags)[1] is None
    for name, value in h.env.items():
        assert check_setting("env", name, value, pb.knobs.env)[1] is None


@pytest.mark.parametrize(("shape", "expect"), [(s, e) for _, s, e in CASES], ids=[c[0] for c in CASES])
def test_propose_against_a_hostile_answer(shape: Shape, expect: str) -> None:
    with HostileServer([shape]) as srv:
        planner = _planner(srv.url)
        try:
            out = planner.propose(make_ctx())
        except PlannerUnavailable as err:
            assert expect == DOWN, f"unavailable: {err}"
            message, calls = str(err), err.calls
            assert "\n" not in message and len(message) < 600 and message.startswith("planner:")
            assert calls and all(c.error for c in calls)
        else:
            calls = out.calls
            if expect == REJECTED:
                assert out.hypothesis is None and out.exhausted and len(out.rejections) == 2
                assert all(r.reason and "\n" not in r.reason for r in out.rejections)
                assert [c.rejection for c in calls] == [r.reason for r in out.rejections]
            else:
                assert expect == OK and out.hypothesis is not None, out.rejections
                _assert_safe(out.hypothesis, make_playbook())
        assert calls and all(c.error or c.rejection or c.output_json for c in calls)
        for c in calls:
            assert API_KEY not in c.model_dump_json()
        if expect == OK and out.proposal is not None:
            assert API_KEY not in out.hypothesis.rationale and API_KEY not in out.proposal.model_dump_json()


BODY_FAULTS = [
    "html_page",
    "invalid_json",
    "choices_string",
    "message_null",
    "json_null",
    "not_utf8",
    "truncated_body",
    "huge_body_3mb",
    "http_500",
    "silence",
]


@pytest.mark.parametrize("name", BODY_FAULTS)
def test_analysis_and_triage_never_raise_for_the_endpoint(name: str) -> None:
    """The analysis call comes after the verdict is saved: a bad body there is a recorded
    failed call and no analysis, never an exception."""
    ctx = make_ctx()
    with HostileServer([TRANSPORT[name]]) as srv:
        planner = _planner(srv.url)
        analysis = planner.analyze(ctx, ctx.view.experiments[0])
        triage = planner.triage(["Traceback (most recent call last):", "RuntimeError: boom"])
    assert analysis.text is None and analysis.calls and all(c.error for c in analysis.calls)
    assert triage.failure_class is None and triage.calls and all(c.error for c in triage.calls)


def test_a_bad_body_is_retried_max_retries_times_then_unavailable() -> None:
    with HostileServer([TRANSPORT["html_page"]]) as srv:
        pb = make_playbook(timeout_s=1, max_retries=3)
        with pytest.raises(PlannerUnavailable, match=r"an HTML page.*\(4 answers in a row\)") as err:
            LlmPlanner(pb.planner, pb.knobs, base_url=srv.url).propose(make_ctx())
        assert len(srv.received) == 4 and len(err.value.calls) == 4
        assert "fix: planner.base_url" in str(err.value)


def test_a_bad_body_then_a_good_answer_recovers() -> None:
    with HostileServer([TRANSPORT["message_null"], proposal("fa3", flags=GOOD)]) as srv:
        out = _planner(srv.url).propose(make_ctx())
    assert out.hypothesis is not None and out.hypothesis.name == "fa3"
    assert [bool(c.error) for c in out.calls] == [True, False]
    assert "choices[0].message is null" in (out.calls[0].error or "")
