"""Routers and the review policy are pure: tested with plain states."""

from __future__ import annotations

from campaign.loop import routing
from campaign.playbook.schema import Playbook


def _pb(**review):
    return Playbook.model_validate(
        {"name": "t", "workloads": {"w": {}}, "review": review, "budget": {"max_experiments": 5}}
    )


def test_after_measure_loops_until_side_cleared_or_max_rounds():
    assert routing.after_measure({"current": {"side": "candidate", "rounds": 0}}, max_rounds=3) == "measure"
    assert routing.after_measure({"current": {"side": "baseline", "rounds": 3}}, max_rounds=3) == "verdict"
    assert routing.after_measure({"current": {"side": "", "rounds": 1}}, max_rounds=3) == "verdict"
    assert routing.after_measure({"current": {"side": "candidate", "failed": True}}, max_rounds=3) == "verdict"


def test_after_render_prefers_halt_then_baseline_then_propose():
    assert routing.after_render({"halt": {"kind": "review"}, "need_baseline": "x"}) == "review"
    assert routing.after_render({"halt": {"kind": "finish"}}) == "finish"
    assert routing.after_render({"need_baseline": "adopted"}) == "baseline"
    assert routing.after_render({}) == "propose"


def test_no_win_streak_halts_for_review():
    pb = _pb(after_no_win_streak=3)
    assert routing.halt_after_verdict({"no_win_streak": 2}, pb, hours_spent=0) is None
    halt = routing.halt_after_verdict({"no_win_streak": 3}, pb, hours_spent=0)
    assert halt["kind"] == "review" and "3 experiments in a row without a win" in halt["reason"]


def test_dead_end_streak_and_budget():
    pb = _pb(after_consecutive_dead_ends=2)
    assert routing.halt_after_verdict({"dead_end_streak": 2}, pb, hours_spent=0)["reason"] == "2 dead ends in a row"
    assert "max_experiments=5" in routing.halt_after_verdict({"experiments_done": 5}, pb, hours_spent=0)["reason"]
    assert "max_hours" in routing.halt_after_verdict({}, pb, hours_spent=49)["reason"]


def test_after_propose_and_gate():
    assert routing.after_propose({"current": None}) == "stack"
    assert routing.after_propose({"halt": {"kind": "finish", "reason": "budget"}}) == "finish"
    assert routing.after_stack({"current": None}) == "finish"
    assert routing.after_stack({"current": {"hypothesis": "stack-check-1"}}) == "gate"
    assert routing.after_propose({"current": {"hypothesis": "h"}}) == "gate"
    assert routing.after_gate({"current": None}) == "propose"
    assert routing.after_review({"finished": True}) == "finish"
    assert routing.after_review({}) == "fingerprint"


def test_queue_wait_has_its_own_budget_and_is_not_node_time():
    pb = Playbook.model_validate({**_pb().model_dump(), "budget": {"max_hours": 1, "max_queue_hours": 2}})
    # three hours queued, half an hour on the node: the node budget holds, the queue budget halts
    assert routing.halt_after_verdict({}, pb, hours_spent=0.5, queue_hours=1.9) is None
    halt = routing.halt_after_verdict({}, pb, hours_spent=0.5, queue_hours=3.0)
    assert halt is not None and "max_queue_hours=2" in halt["reason"]
    assert routing.halt_after_verdict({}, _pb(), hours_spent=0.5, queue_hours=1e6) is None  # no queue budget set
