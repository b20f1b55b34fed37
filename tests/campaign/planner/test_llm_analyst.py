"""Analysis after a verdict and triage of an unexplained exit: short, validated, optional."""

from __future__ import annotations

import pytest

from campaign.domain.models import FailureClass
from campaign.domain.records import ExperimentView, LevelComparison, Verdict
from campaign.planner.llm import LlmPlanner, short_analysis
from campaign.planner.schemas import ANALYSIS_MAX_WORDS
from tests.campaign.planner.conftest import API_KEY, make_ctx, make_playbook
from tests.fake_openai import FakeOpenAI, answer, status, text


def planner(server: FakeOpenAI, **spec: object) -> LlmPlanner:
    pb = make_playbook(**spec)
    return LlmPlanner(pb.planner, pb.knobs, api_key=API_KEY, base_url=server.url)


def experiment() -> ExperimentView:
    level = LevelComparison(
        workload="chat",
        concurrency=64,
        baseline_mean=900,
        candidate_mean=950,
        delta_pct=5.6,
        ci_low_pct=3.1,
        ci_high_pct=8.0,
        n_baseline=3,
        n_candidate=3,
        winner="candidate",
    )
    return ExperimentView(
        id="e9",
        hypothesis="cg-bs-256",
        rationale="fewer eager batches",
        verdict=Verdict(kind="win", reason="+5.6% at C=64", levels=[level]),
    )


def test_analysis_is_a_short_model_written_paragraph(server: FakeOpenAI) -> None:
    long = " ".join(f"w{i}" for i in range(300)) + "\x1b[31m"
    server.script(answer({"analysis": "Larger CUDA graphs\ncover C=64."}), answer({"analysis": long}))
    llm = planner(server)
    exp = experiment()
    out = llm.analyze(make_ctx(), exp)
    assert out.text == "Larger CUDA graphs cover C=64." and out.model_written
    assert "+5.6% [+3.1, +8.0] candidate" in server.chat_requests()[0].prompt_text()
    out = llm.analyze(make_ctx(), exp)
    assert out.text is not None and len(out.text.split()) == ANALYSIS_MAX_WORDS + 1 and out.text.endswith("…")
    assert "\x1b" not in out.text
    assert exp.verdict is not None and exp.verdict.kind == "win"  # commentary never touches the verdict
    assert [c.purpose for c in out.calls] == ["analyze"]


def test_invalid_or_unavailable_analysis_is_none_and_recorded(server: FakeOpenAI) -> None:
    server.script(text("no json here"), status(401))
    llm = planner(server)
    out = llm.analyze(make_ctx(), experiment())
    assert out.text is None and "not valid JSON" in (out.calls[0].rejection or "")
    out = llm.analyze(make_ctx(), experiment())
    assert out.text is None and "HTTP 401" in (out.calls[0].error or "")


def test_analysis_can_be_switched_off(server: FakeOpenAI) -> None:
    out = planner(server, analyze=False).analyze(make_ctx(), experiment())
    assert out.text is None and out.calls == [] and server.chat_requests() == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"failure_class": "oom"}, FailureClass.oom),
        ({"failure_class": "nccl_error"}, FailureClass.nccl_error),
        ({"failure_class": "exited"}, None),  # says nothing the rule table did not
        ({"failure_class": "unknown"}, None),
        ({"failure_class": "cosmic_rays"}, None),
        ({"class": "oom"}, None),
    ],
)
def test_triage_returns_only_a_known_class(
    server: FakeOpenAI, reply: dict[str, str], expected: FailureClass | None
) -> None:
    server.script(answer(reply))
    out = planner(server).triage(["Loading weights", "RuntimeError: CUDA error: out of memory"])
    assert out.failure_class == expected
    [call] = out.calls
    assert (call.output_json is not None) == (expected is not None)
    assert (call.rejection is not None) == (expected is None)


def test_triage_never_sends_a_secret_from_the_log(server: FakeOpenAI) -> None:
    server.script(answer({"failure_class": "bad_flag"}))
    out = planner(server).triage([f"argv: --api-key {API_KEY}", "error: unrecognized arguments: --foo"])
    assert out.failure_class == FailureClass.bad_flag
    body = str(server.chat_requests()[0].body)
    assert API_KEY not in body and "unrecognized arguments" in body
    assert (
        server.chat_requests()[0].body["response_format"]["json_schema"]["schema"]["properties"]["failure_class"][
            "enum"
        ][0]
        == "oom"
    )


def test_short_analysis_is_pure() -> None:
    assert short_analysis("a\tb\n\nc") == "a b c"
