"""Choosing what to measure next: the next hypothesis (queue, then planner), the
patch gate, and the stack check of adopted wins once the queue is empty."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from campaign.loop.deps import Deps
from campaign.loop.experiment import baseline_noise
from campaign.loop.nodes.base import NodeFamily
from campaign.loop.state import CampaignState, current_of
from campaign.playbook.schema import HypothesisSpec
from campaign.verdict import stack_check
from campaign.verdict.stacking import BisectionState

__all__ = ["ProposalNodes", "start_hypothesis"]


def start_hypothesis(d: Deps, cid: str, spec: HypothesisSpec) -> dict[str, Any]:
    """Mark `spec` running and name its next attempt: the `current` a branch measures."""
    d.store.set_hypothesis_status(cid, spec.name, "running")
    attempt = len(d.store.list_experiments(cid, hypothesis=spec.name)) + 1
    d.events("hypothesis", {"name": spec.name, "attempt": attempt, "rationale": spec.rationale})
    return {"hypothesis": spec.name, "attempt": attempt, "rounds": 0, "side": "", "failed": False, "infra_retries": 0}


class ProposalNodes(NodeFamily):
    def propose(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        rec = store.next_queued_hypothesis(cid)
        spec = rec.spec if rec is not None else None
        if spec is None and self.d.planner is not None:
            from campaign.loop.planner_bridge import propose_with_planner

            spec = propose_with_planner(self.d, cid)
        if spec is None:
            return {"current": None}
        return {"current": start_hypothesis(self.d, cid, spec)}

    def gate(self, state: CampaignState) -> dict[str, Any]:
        """Human approval before a patch is applied (code before interrupt is idempotent)."""
        cid, cur = state["campaign_id"], current_of(state)
        spec = self._spec(cid, cur["hypothesis"])
        rec = self.d.store.get_hypothesis(cid, spec.name)
        needs = (spec.patch and self.pb.review.before_patch) or (spec.patch and rec is not None and rec.source == "llm")
        if not needs:
            return {}
        reason = f"approve the patch of '{spec.name}' ({spec.patch}) before it is applied"
        seq = self.d.store.request_review(cid, reason, key=f"patch:{spec.name}#{cur['attempt']}")
        self.d.store.update_campaign(cid, status="awaiting_review", halt_reason=reason)
        self._render(cid)
        decision = interrupt({"kind": "gate", "seq": seq, "hypothesis": spec.name, "reason": reason})
        self._decide(cid, seq, decision)
        self.d.store.update_campaign(cid, status="running", halt_reason=None)
        if decision.get("decision") == "reject":
            self.d.store.set_hypothesis_status(
                cid, spec.name, "rejected", rejection_reason=decision.get("note") or "rejected at review"
            )
            return {"current": None}
        return {}

    def stack(self, state: CampaignState) -> dict[str, Any]:
        """Queue empty: do the adopted wins add up against the original baseline?  Each
        call measures nothing itself; it picks the next subset to measure (or ends)."""
        cid, store, pb = state["campaign_id"], self.d.store, self.pb
        wins = stack_check.adopted_wins(store, cid)
        st = dict(state.get("stack") or {})
        if len(wins) < 2 or (st.get("for") == state.get("baseline_id") and st.get("done")):
            return {"current": None}
        if st.get("for") != state.get("baseline_id"):
            noise, _ = baseline_noise(store, state.get("baseline_id"), pb.verdict.metric)
            st = {
                "for": state.get("baseline_id"),
                "k": 0,
                "bisect": stack_check.start(wins, max(noise or 2.0, pb.verdict.min_effect_pct)).model_dump(),
            }
        bis = BisectionState.model_validate(st["bisect"])
        if st.get("pending"):
            exps = store.list_experiments(cid, hypothesis=st["pending"])
            v = store.get_verdict(exps[-1].id) if exps else None
            bis = bis.record(float(v.headline_delta_pct or 0.0) if v and v.headline_delta_pct is not None else -100.0)
            st["pending"] = None
        subset = bis.next_subset()
        if subset is None:
            msg = stack_check.summary(bis, wins)
            store.add_event(cid, "stack", msg, key=f"stack:{st['for']}")
            return {"current": None, "stack": {**st, "bisect": bis.model_dump(), "done": True}}
        st["k"] += 1
        spec = stack_check.subset_hypothesis(pb, wins, subset, st["k"])
        store.upsert_hypothesis(cid, spec, source="review")
        store.set_hypothesis_status(cid, spec.name, "running")
        original = stack_check.original_config(pb).model_dump()
        return {
            "current": {
                "hypothesis": spec.name,
                "attempt": 1,
                "rounds": 0,
                "side": "",
                "failed": False,
                "infra_retries": 0,
                "reference_config": original,
            },
            "stack": {**st, "bisect": bis.model_dump(), "pending": spec.name},
        }
