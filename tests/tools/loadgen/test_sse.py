"""SseTimer's bytes-level classification against a full JSON decode of every event."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.loadgen.stream import SseTimer, _decoded_content

TEXTS = st.one_of(
    st.just(""),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(['"', "\\", '"text": "x"', '"content":"y"', "\u00e9", "\n", '"usage": {"a": 1}']),
)


@st.composite
def events(draw: st.DrawFn, chat: bool) -> dict:
    kind = draw(st.sampled_from(["content", "content", "empty_choices", "role_only", "logprobs"]))
    text = draw(TEXTS)
    if chat:
        delta: dict = (
            {"role": "assistant"}
            if kind == "role_only"
            else {draw(st.sampled_from(["content", "reasoning_content"])): text}
        )
        choice: dict = {"index": 0, "delta": delta}
        if kind == "logprobs":
            choice["logprobs"] = {"content": [{"token": "a", "logprob": -0.1}]}
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": {"tokens": ["a"], "text_offset": [0]} if kind == "logprobs" else None,
        }
    usage = draw(st.one_of(st.none(), st.just({"prompt_tokens": 2, "completion_tokens": 9})))
    return {"id": "x", "choices": [] if kind == "empty_choices" else [choice], "usage": usage}


def stream(evts: list[dict], compact: bool) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return (
        b"".join(b"data: " + json.dumps(e, separators=separators).encode() + b"\n\n" for e in evts)
        + b"data: [DONE]\n\n"
    )


@pytest.mark.parametrize("chat", [False, True])
@settings(max_examples=150, deadline=None)
@given(data=st.data(), compact=st.booleans(), piece=st.integers(1, 64))
def test_counts_match_a_full_decode(chat: bool, data: st.DataObject, compact: bool, piece: int) -> None:
    evts = data.draw(st.lists(events(chat), max_size=12))
    raw = stream(evts, compact)
    timer = SseTimer(chat, 0.0)
    for i in range(0, len(raw), piece):  # arbitrary splits, one read time per piece
        timer.feed(raw[i : i + piece], float(i))
    expected = sum(_decoded_content(e, chat) for e in evts)
    assert timer.done and timer.chunks == expected
    assert len(timer.itl) == max(0, expected - 1)
    usages = [e["usage"] for e in evts if e["usage"]]
    assert timer.usage == (usages[-1] if usages else None)


def test_first_content_time_and_gaps_use_the_read_times() -> None:
    timer = SseTimer(False, st=10.0)
    timer.feed(b'data: {"choices":[{"text":""}]}\n\n', 10.5)  # empty text: not a token
    timer.feed(b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n', 11.0)
    timer.feed(b'\ndata: {"choices":[{"text":"c"}]}\r\n\r\n', 11.25)
    timer.feed(b"data: [DONE]\n\n", 12.0)
    outcome = timer.outcome()
    assert outcome.ok and outcome.ttft_s == 1.0 and outcome.itl_s == [0.0, 0.25] and outcome.e2e_s == 2.0
    assert outcome.output_tokens == 3 and not outcome.usage  # no usage block: counted chunks


def test_non_json_payloads_are_bad_events() -> None:
    timer = SseTimer(True, 0.0)
    with pytest.raises(ValueError, match="not a JSON object"):
        timer.feed(b"data: <html>\n\n", 1.0)
    with pytest.raises(ValueError):
        SseTimer(True, 0.0).feed(b'data: {"choices":[{"delta":{"content":"x"}}]\n\n', 1.0)  # truncated JSON
