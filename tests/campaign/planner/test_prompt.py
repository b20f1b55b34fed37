"""The prompt carries the journal's facts and stays within planner.context_tokens."""

from __future__ import annotations

import pytest

from campaign.domain.errors import UserError
from campaign.domain.records import DeadEnd, ExperimentView, Verdict
from campaign.planner.prompt import estimate_tokens, proposal_messages, triage_messages
from campaign.planner.schemas import Rejection
from tests.campaign.planner.conftest import make_ctx, make_playbook, make_view


def test_the_prompt_carries_the_facts() -> None:
    ctx = make_ctx(reopened=[])
    text = "\n".join(m["content"] for m in proposal_messages(ctx, ctx.playbook.knobs, [], 6000))
    for fact in (
        "cuda-graph-max-bs: int in [1, 512]",
        '"Ring", "Tree"',
        "nccl-tree: slower by 4.1% at C=64",
        "revisit when: driver, nccl",
        "chat C=64: 912.2",
        "575.51",
        "- cg-bs-256",
        "dead_end, -4.1%",
    ):
        assert fact in text
    assert "driver, nccl REOPENED" not in text
    text = "\n".join(
        m["content"] for m in proposal_messages(make_ctx(reopened=["nccl-tree"]), ctx.playbook.knobs, [], 6000)
    )
    assert "driver, nccl REOPENED" in text


def test_rejections_are_fed_back_in_order() -> None:
    ctx = make_ctx()
    msgs = proposal_messages(ctx, ctx.playbook.knobs, [Rejection(reason="r1", raw="{a}"), Rejection(reason="r2")], 6000)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "Rejected: r1" in msgs[3]["content"] and "Rejected: r2" in msgs[5]["content"]


def big_view():  # type: ignore[no-untyped-def]
    view = make_view()
    for i in range(300):
        view.experiments.append(
            ExperimentView(
                id=f"x{i}",
                hypothesis=f"idea-{i:03d}",
                verdict=Verdict(kind="inconclusive", reason="overlapping intervals at every level " * 2),
            )
        )
    for i in range(100):
        view.dead_ends.append(
            DeadEnd(hypothesis=f"dead-{i:03d}", experiment_id=f"x{i}", reason="crashed " * 5, revisit_on=["cuda"])
        )
    return view


@pytest.mark.parametrize("budget", [800, 1500, 4000])
def test_oldest_facts_are_dropped_to_fit_the_budget(budget: int) -> None:
    ctx = make_ctx(view=big_view(), reopened=["dead-000"])
    msgs = proposal_messages(ctx, ctx.playbook.knobs, [Rejection(reason="too big")], budget)
    text = "\n".join(m["content"] for m in msgs)
    assert estimate_tokens(msgs) <= budget
    assert "cuda-graph-max-bs" in text and "Rejected: too big" in text  # never dropped
    assert "older entries omitted" in text
    assert "idea-000" not in text  # oldest scoreboard rows go first
    if budget >= 1500:
        assert "idea-299" in text and "dead-000" in text  # newest row, reopened dead end kept


def test_a_budget_too_small_for_the_knob_space_is_a_user_error() -> None:
    pb = make_playbook()
    pb.knobs.flags.update({f"knob-{i}": pb.knobs.flags["tp-size"] for i in range(200)})
    ctx = make_ctx(playbook=pb)
    with pytest.raises(UserError, match="planner.context_tokens: 500 is too small"):
        proposal_messages(ctx, pb.knobs, [], 500)


def test_triage_keeps_the_last_log_lines() -> None:
    lines = [f"line {i} " + "x" * 60 for i in range(1000)]
    msgs = triage_messages(lines, 600)
    text = msgs[1]["content"]
    assert estimate_tokens(msgs) <= 600 and "line 999" in text and "line 0 " not in text and "oom" in text
