"""Routers: pure functions of the state (and the policy) returning where to go next."""

from __future__ import annotations

from typing import Any, Literal

from campaign.loop.state import CampaignState
from campaign.playbook.schema import Playbook


def after_fingerprint(state: CampaignState) -> Literal["review", "baseline"]:
    halt = state.get("halt")
    return "review" if halt and halt.get("kind") == "review" else "baseline"


def after_baseline(state: CampaignState) -> Literal["propose", "finish"]:
    halt = state.get("halt")
    return "finish" if halt and halt.get("kind") == "fail" else "propose"


def after_propose(state: CampaignState) -> Literal["gate", "review", "stack", "finish"]:
    halt = state.get("halt")
    if halt:
        return "review" if halt.get("kind") == "review" else "finish"
    return "gate" if state.get("current") else "stack"


def after_stack(state: CampaignState) -> Literal["gate", "finish"]:
    """The stack check either names a subset of adopted wins to measure, or is done."""
    return "gate" if state.get("current") else "finish"


def after_gate(state: CampaignState) -> Literal["apply", "propose"]:
    return "apply" if state.get("current") else "propose"


def after_measure(state: CampaignState, max_rounds: int) -> Literal["measure", "verdict"]:
    """Another side or round to measure, or enough to decide.  `rounds` counts
    finished rounds; the adaptive repeat rule is applied in the measure node, which
    sets `side` to "" once no further round is needed."""
    cur = state.get("current") or {}
    if cur.get("failed"):
        return "verdict"
    if cur.get("side") and cur.get("rounds", 0) < max_rounds:
        return "measure"
    return "verdict"


def after_render(state: CampaignState) -> Literal["baseline", "propose", "review", "finish"]:
    halt = state.get("halt")
    if halt:
        return "review" if halt.get("kind") == "review" else "finish"
    if state.get("need_baseline"):
        return "baseline"
    return "propose"


def after_review(state: CampaignState) -> Literal["fingerprint", "finish"]:
    return "finish" if state.get("finished") else "fingerprint"


def halt_after_verdict(
    state: CampaignState, pb: Playbook, *, hours_spent: float, queue_hours: float = 0.0
) -> dict[str, Any] | None:
    """The review policy and budget, as a pure decision after each verdict."""
    n_done = state.get("experiments_done", 0)
    if n_done >= pb.budget.max_experiments:
        kind = "review" if pb.review.on_budget else "finish"
        return {
            "kind": kind,
            "reason": f"budget: {n_done} experiments reached max_experiments={pb.budget.max_experiments}",
        }
    if hours_spent >= pb.budget.max_hours:
        kind = "review" if pb.review.on_budget else "finish"
        return {
            "kind": kind,
            "reason": f"budget: {hours_spent:.1f} node hours reached max_hours={pb.budget.max_hours:g}",
        }
    if pb.budget.max_queue_hours is not None and queue_hours >= pb.budget.max_queue_hours:
        kind = "review" if pb.review.on_budget else "finish"
        return {
            "kind": kind,
            "reason": f"budget: {queue_hours:.1f} hours waiting in the scheduler queue reached "
            f"max_queue_hours={pb.budget.max_queue_hours:g}",
        }
    des = state.get("dead_end_streak", 0)
    if pb.budget.stop_after_dead_ends and des >= pb.budget.stop_after_dead_ends:
        return {"kind": "finish", "reason": f"budget: {des} dead ends in a row (stop_after_dead_ends)"}
    if pb.review.after_consecutive_dead_ends and des >= pb.review.after_consecutive_dead_ends:
        return {"kind": "review", "reason": f"{des} dead ends in a row"}
    nws = state.get("no_win_streak", 0)
    if pb.review.after_no_win_streak and nws >= pb.review.after_no_win_streak:
        return {"kind": "review", "reason": f"diminishing returns: {nws} experiments in a row without a win"}
    return None
