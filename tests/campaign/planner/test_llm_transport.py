"""Endpoint failures: the openai client's retries with backoff, bounded timeouts, a
clear `PlannerUnavailable`, and the API key never in anything recorded."""

from __future__ import annotations

import socket
import time

import pytest

from campaign.planner.base import PlannerUnavailable
from campaign.planner.llm import LlmPlanner
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.fake_openai import FakeOpenAI, delayed, proposal, status, text

GOOD = dict(name="fa3-attention", flags={"attention-backend": "fa3"})


def planner(url: str, **spec: object) -> LlmPlanner:
    pb = make_playbook(**spec)
    return LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=url)


@pytest.mark.parametrize("code", [429, 500, 503])
def test_transient_errors_are_retried_with_backoff(server: FakeOpenAI, code: int) -> None:
    server.script(status(code), status(code), proposal(**GOOD))
    out = planner(server.url, max_retries=2).propose(make_ctx())
    assert out.hypothesis is not None and out.hypothesis.name == "fa3-attention"
    reqs = server.chat_requests()
    assert len(reqs) == 3
    gaps = [b.at - a.at for a, b in zip(reqs, reqs[1:])]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.7  # 0.5 s then 1 s, less up to 25% jitter
    [call] = out.calls
    assert call.latency_ms >= 1000 and call.error is None


def test_rate_limiting_that_persists_is_unavailable_after_bounded_retries(server: FakeOpenAI) -> None:
    server.script(*[status(429, headers={"retry-after-ms": "20"}) for _ in range(3)])
    with pytest.raises(PlannerUnavailable, match="rate-limiting") as err:
        planner(server.url, max_retries=2).propose(make_ctx())
    assert len(server.chat_requests()) == 3
    assert err.value.calls and err.value.calls[-1].error


def test_a_wrong_key_is_one_clear_line_without_retries(server: FakeOpenAI) -> None:
    server.script(status(401, "Incorrect API key provided: sk-test-SECRET..."))
    with pytest.raises(PlannerUnavailable) as err:
        planner(server.url, max_retries=3).propose(make_ctx())
    message = str(err.value)
    assert "HTTP 401" in message and "OPENAI_API_KEY" in message and "\n" not in message
    assert API_KEY not in message
    assert len(server.chat_requests()) == 1


def test_a_silent_endpoint_times_out_after_bounded_retries(server: FakeOpenAI) -> None:
    server.script(delayed(3.0), delayed(3.0), proposal(**GOOD))
    start = time.monotonic()
    with pytest.raises(PlannerUnavailable, match=r"no answer from .* within 0.3 s after 1 retries"):
        planner(server.url, timeout_s=0.3, max_retries=1).propose(make_ctx())
    assert time.monotonic() - start < 2.5
    assert len(server.chat_requests()) == 2


def test_an_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    with pytest.raises(PlannerUnavailable, match=f"cannot connect to http://127.0.0.1:{port}/v1"):
        planner(f"http://127.0.0.1:{port}/v1", max_retries=1).propose(make_ctx())


def test_the_key_reaches_the_server_but_nothing_recorded(server: FakeOpenAI) -> None:
    echo = f'{{"name": "leak", "rationale": "key {API_KEY}"'  # invalid JSON that echoes the key
    server.script(
        text(echo),
        proposal(name="key-in-rationale", flags={"attention-backend": "triton"}, rationale=f"I saw {API_KEY}"),
        status(401, f"bad key {API_KEY}"),
    )
    llm = planner(server.url)
    out = llm.propose(make_ctx())
    with pytest.raises(PlannerUnavailable) as err:
        llm.propose(make_ctx())
    assert all(r.headers.get("Authorization") == f"Bearer {API_KEY}" for r in server.chat_requests())
    recorded = [out.model_dump_json(), str(err.value)] + [c.model_dump_json() for c in err.value.calls]
    assert out.hypothesis is not None and out.rejections  # both paths were exercised
    for blob in recorded:
        assert API_KEY not in blob
    assert "***" in out.model_dump_json()
    for req in server.chat_requests():
        assert API_KEY not in str(req.body)  # nor sent back to the model in the feedback
