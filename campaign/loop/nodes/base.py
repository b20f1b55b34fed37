"""What every node family shares: the deps, the node a step runs on, the hypothesis
spec, rendering the journal and applying a review decision.

Each graph node reads the state, calls one port or one pure function, writes what it
learned to the store (idempotent upserts keyed by ids the state already holds, since a
node interrupted by a crash runs again from its top on resume) and returns a partial
state update.  Every verdict rule lives in `campaign.verdict`, none here.
"""

from __future__ import annotations

from typing import Any

from campaign.domain.models import EffectiveConfig
from campaign.domain.prompts import generate_diverse
from campaign.loop.deps import Deps
from campaign.loop.state import CampaignState
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports import Node

__all__ = ["NodeFamily", "correctness_prompts", "reference_config"]

_VERIFIED: set[tuple[str, str]] = set()  # (campaign, journal) rendered in full by this process


class NodeFamily:
    """Base of the node families: one small class per family of graph nodes."""

    def __init__(self, deps: Deps) -> None:
        self.d = deps

    @property
    def pb(self) -> Playbook:
        return self.d.playbook

    def _node(self, state: CampaignState) -> Node:
        """The node this step runs on: `node_index` is set per branch when hypotheses
        fan out over several nodes; the first node otherwise."""
        return self.d.nodes[state.get("node_index") or 0]

    def _spec(self, cid: str, name: str) -> HypothesisSpec:
        rec = self.d.store.get_hypothesis(cid, name)
        if rec is None:
            raise RuntimeError(f"graph: hypothesis {name!r} of {cid} is not in the record")
        return rec.spec

    def _render(self, cid: str) -> None:
        if self.d.journal_path is None:
            return
        from campaign.journal.publish import publish_journal

        # the first render of a run looks at every page and plot (a person may have edited
        # pages while it was halted for review); the ones after each verdict cost what changed
        first = (cid, str(self.d.journal_path)) not in _VERIFIED
        publish_journal(self.d.store, cid, self.d.journal_path, db_label=self.d.db_label, verify=first)
        _VERIFIED.add((cid, str(self.d.journal_path)))
        self.d.store.refresh_show_cache(cid)  # `campaign show --json` then reads stored text

    def _decide(self, cid: str, seq: int, decision: dict[str, Any]) -> None:
        added = [HypothesisSpec.model_validate(h) for h in decision.get("add_hypotheses") or []]
        self.d.store.decide_review(
            cid,
            seq,
            decision.get("decision") or "approve",
            note=decision.get("note") or "",
            added=added,
            overrides=decision.get("overrides") or None,
        )


def reference_config(state: CampaignState) -> EffectiveConfig:
    """What a candidate is compared with: the current baseline, or the reference config
    the experiment names (stack validation compares with the original baseline)."""
    ref = (state.get("current") or {}).get("reference_config")
    return EffectiveConfig.model_validate(ref or state["baseline_config"])


def correctness_prompts(pb: Playbook) -> list[str] | None:
    spec = pb.verdict.correctness
    if not spec.enabled:
        return None
    return generate_diverse(48, seed=20260, size=spec.prompts)
