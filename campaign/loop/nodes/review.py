"""Halting and publishing: render the journal, halt for a human review (resume
applies the decision), and finish the campaign."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from campaign.domain import killpoint
from campaign.loop.nodes.base import NodeFamily
from campaign.loop.planner_bridge import stop_reason
from campaign.loop.state import CampaignState

__all__ = ["ReviewNodes"]


class ReviewNodes(NodeFamily):
    def render(self, state: CampaignState) -> dict[str, Any]:
        self._render(state["campaign_id"])
        return {}

    def review(self, state: CampaignState) -> dict[str, Any]:
        """Halt for a human: record why, render, interrupt; apply the decision on resume."""
        cid, store = state["campaign_id"], self.d.store
        reason = (state.get("halt") or {}).get("reason", "review requested")
        n = state.get("reviews_done", 0) + 1
        seq = store.request_review(cid, reason, key=f"review#{n}")
        store.update_campaign(cid, status="awaiting_review", halt_reason=reason)
        self._render(cid)
        decision = interrupt({"kind": "review", "seq": seq, "reason": reason})
        self._decide(cid, seq, decision)
        if decision.get("decision") == "reject":
            store.update_campaign(cid, status="finished", halt_reason=f"stopped at review: {reason}")
            self._render(cid)
            return {"halt": None, "finished": True, "reviews_done": n}
        store.update_campaign(cid, status="running", halt_reason=None)
        return {"halt": None, "no_win_streak": 0, "dead_end_streak": 0, "reviews_done": n}

    def finish(self, state: CampaignState) -> dict[str, Any]:
        """Mark the campaign ended, then render.  A kill between the two leaves this
        node unfinished in the checkpoint: resume runs it again (and every command that
        opens the campaign re-renders a journal older than the record)."""
        cid, store = state["campaign_id"], self.d.store
        halt = state.get("halt") or {}
        if state.get("finished") and store.get_campaign(cid).status == "finished":
            return {"finished": True}
        if halt.get("kind") == "fail":
            store.update_campaign(cid, status="failed", halt_reason=halt.get("reason"))
        else:
            reason = halt.get("reason") or (stop_reason(store, cid) if self.d.planner is not None else None)
            store.update_campaign(cid, status="finished", halt_reason=reason or "hypothesis queue exhausted")
        killpoint.reached("finish:marked")
        self._render(cid)
        return {"finished": True}
