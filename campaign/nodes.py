"""The graph's nodes.  Each reads the state, calls one tool or one pure function,
writes what it learned to the store, and returns a partial state update.

Everything a node writes is an idempotent upsert keyed by ids that the state
already holds, because a node interrupted by a crash runs again on resume.
"""

from __future__ import annotations

import json
from typing import Any

from langgraph.types import interrupt

from campaign import verdict as verdict_logic
from campaign.deps import Deps
from campaign.experiment import (
    baseline_samples_for,
    confound_changes,
    correctness_of,
    experiment_id,
    hypothesis_config,
    record_measurement,
    workloads_of,
)
from campaign.playbook import HypothesisSpec
from campaign.revisit import changed_components, revisit_components
from campaign.routing import halt_after_verdict
from campaign.state import CampaignState
from tools.models import EffectiveConfig, FailureClass


class Nodes:
    def __init__(self, deps: Deps) -> None:
        self.d = deps

    # ----------------------------------------------------------- environment
    def fingerprint(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        previous = store.latest_fingerprint(cid)
        fp = self.d.node.fingerprint()
        store.record_fingerprint(cid, fp)
        update: dict[str, Any] = {"env_changed": []}
        if previous is None:
            return update
        changed = changed_components(previous, fp)
        if not changed:
            return update
        what = ", ".join(f"{c} {previous.components().get(c, '?')} -> {fp.components().get(c, '?')}" for c in changed)
        store.add_event(cid, "environment", f"environment changed: {what}")
        reopened = store.reopen_dead_ends(cid, changed)
        if reopened:
            store.add_event(cid, "reopen", "re-opened dead ends: " + ", ".join(reopened))
        self.d.events("environment", {"changed": what, "reopened": reopened})
        update.update(env_changed=changed, need_baseline=f"environment change: {what}",
                      no_win_streak=0, dead_end_streak=0)
        if self.d.playbook.review.on_environment_change:
            update["halt"] = {"kind": "review", "reason": f"environment changed: {what}"}
        return update

    # -------------------------------------------------------------- baseline
    def baseline(self, state: CampaignState) -> dict[str, Any]:
        if state.get("baseline_id") and not state.get("need_baseline"):
            return {}
        cid, store, pb = state["campaign_id"], self.d.store, self.d.playbook
        config = EffectiveConfig.model_validate(state.get("baseline_config") or
                                                {"flags": pb.baseline.flags, "env": pb.baseline.env})
        reason = state.get("need_baseline") or "campaign start"
        n = store.count_experiments(cid, "baseline") + 1
        eid = experiment_id(cid, "baseline", n)
        store.start_experiment(eid, cid, hypothesis="baseline", attempt=n, role="baseline", node=self.d.node.name,
                               config=config, reason=reason)
        self.d.events("baseline", {"reason": reason, "experiment": eid})
        repeats = pb.verdict.repeats.min
        failure = None
        for r in range(repeats):
            if store.has_side(eid, "baseline", r):
                continue
            m = self.d.node.measure(config, workloads_of(pb), label=f"baseline{n}-r{r}",
                                    correctness_prompts=correctness_prompts(pb) if r == 0 else None,
                                    correctness_tokens=pb.verdict.correctness.max_tokens)
            record_measurement(store, eid, "baseline", r, m, self.d.node.name)
            if m.failure:
                failure = m.failure
                break
        if failure is not None:
            store.finish_experiment(eid, "failed", failure=failure)
            store.update_campaign(cid, status="failed", halt_reason=f"baseline failed: {failure.summary}")
            return {"halt": {"kind": "fail", "reason": f"the baseline does not run: {failure.failure_class.value}: "
                                                        f"{failure.summary}"}}
        store.finish_experiment(eid, "finished")
        store.update_campaign(cid, baseline_experiment_id=eid)
        store.add_event(cid, "baseline", f"baseline {eid} measured ({reason})")
        self._render(cid)
        return {"baseline_id": eid, "need_baseline": None, "baseline_config": config.model_dump()}

    # --------------------------------------------------------------- propose
    def propose(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        item = store.next_queued_hypothesis(cid)
        if item is None and self.d.planner is not None:
            item = self._ask_planner(cid)
        if item is None:
            return {"current": None}
        spec, attempt = item
        store.set_hypothesis_status(cid, spec.name, "running")
        eid = experiment_id(cid, spec.name, attempt)
        self.d.events("hypothesis", {"name": spec.name, "attempt": attempt, "rationale": spec.rationale})
        return {"current": {"hypothesis": spec.name, "experiment_id": eid, "attempt": attempt, "rounds": 0,
                            "side": "", "failed": False, "infra_retries": 0}}

    def _ask_planner(self, cid: str):
        from campaign.planner_bridge import propose_with_planner

        return propose_with_planner(self.d, cid)

    # ------------------------------------------------------------------ gate
    def gate(self, state: CampaignState) -> dict[str, Any]:
        cur = state["current"]
        spec = self.d.store.hypothesis_spec(state["campaign_id"], cur["hypothesis"])
        if not (spec.patch and self.d.playbook.review.before_patch):
            return {}
        seq = self.d.store.request_review(state["campaign_id"], f"before patch: {spec.name} applies {spec.patch}")
        self.d.store.update_campaign(state["campaign_id"], status="awaiting_review",
                                     halt_reason=f"approve the patch of '{spec.name}' before it is applied")
        self._render(state["campaign_id"])
        decision = interrupt({"kind": "gate", "seq": seq, "hypothesis": spec.name, "patch": spec.patch})
        self.d.store.decide_review(state["campaign_id"], seq, decision)
        self.d.store.update_campaign(state["campaign_id"], status="running", halt_reason=None)
        if decision.get("decision") == "reject":
            self.d.store.set_hypothesis_status(state["campaign_id"], spec.name, "rejected",
                                               reason=decision.get("note") or "rejected at review")
            return {"current": None}
        return {}

    # ----------------------------------------------------------------- apply
    def apply(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store = state["campaign_id"], state["current"], self.d.store
        spec = store.hypothesis_spec(cid, cur["hypothesis"])
        base = EffectiveConfig.model_validate(state["baseline_config"])
        config = hypothesis_config(base, spec)
        store.start_experiment(cur["experiment_id"], cid, hypothesis=spec.name, attempt=cur["attempt"],
                               role="candidate", node=self.d.node.name, config=config,
                               baseline_ref=state.get("baseline_id"))
        store.record_artifact(cur["experiment_id"], "config_diff",
                              json.dumps([c.model_dump() for c in confound_changes(base, config, None)]))
        first = "baseline" if self.d.playbook.verdict.interleave else "candidate"
        return {"current": {**cur, "side": first}}

    # --------------------------------------------------------------- measure
    def measure(self, state: CampaignState) -> dict[str, Any]:
        """One side of one round: launch, correctness probe (round 0), workloads, stop."""
        cid, cur, store, pb = state["campaign_id"], dict(state["current"]), self.d.store, self.d.playbook
        side, rnd, eid = cur["side"], cur["rounds"], cur["experiment_id"]
        spec = store.hypothesis_spec(cid, cur["hypothesis"])
        base = EffectiveConfig.model_validate(state["baseline_config"])
        config = base if side == "baseline" else hypothesis_config(base, spec)
        probe = correctness_prompts(pb) if rnd == 0 else None
        m = self.d.node.measure(config, workloads_of(pb), label=f"{spec.name}-{side}-r{rnd}",
                                correctness_prompts=probe, correctness_tokens=pb.verdict.correctness.max_tokens)
        if m.infrastructure_fault and cur.get("infra_retries", 0) < pb.budget.max_infra_retries:
            store.add_event(cid, "infrastructure", f"{spec.name} {side} r{rnd}: {m.failure.failure_class.value}, retrying")
            return {"current": {**cur, "infra_retries": cur.get("infra_retries", 0) + 1}}
        record_measurement(store, eid, side, rnd, m, self.d.node.name)
        if m.failure is not None:
            if side == "candidate" or m.infrastructure_fault:
                store.record_failure(eid, m.failure)
                return {"current": {**cur, "failed": True, "side": ""}}
        if side == "baseline":
            return {"current": {**cur, "side": "candidate"}}
        rounds = rnd + 1
        samples = store.level_samples(eid, baseline_fallback=state.get("baseline_id"))
        more = rounds < pb.verdict.repeats.min or (
            pb.verdict.policy == "adaptive" and rounds < pb.verdict.repeats.max
            and verdict_logic.needs_more_repeats(samples, pb.verdict, rounds))
        nxt = ("baseline" if pb.verdict.interleave else "candidate") if more else ""
        self.d.events("round", {"hypothesis": spec.name, "round": rounds, "more": more})
        return {"current": {**cur, "rounds": rounds, "side": nxt}}

    # --------------------------------------------------------------- verdict
    def verdict(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store, pb = state["campaign_id"], state["current"], self.d.store, self.d.playbook
        eid = cur["experiment_id"]
        spec = store.hypothesis_spec(cid, cur["hypothesis"])
        failure = store.experiment_failure(eid)
        base = EffectiveConfig.model_validate(state["baseline_config"])
        config = hypothesis_config(base, spec)
        confounded = confound_changes(base, config, spec)
        samples = [] if failure else store.level_samples(eid, baseline_fallback=state.get("baseline_id"))
        comparisons = verdict_logic.compare_levels(samples, pb.verdict, paired=pb.verdict.interleave) if samples else []
        correctness = None if failure else correctness_of(store, eid, state.get("baseline_id"), pb)
        revisit = revisit_components(failure.failure_class if failure else None, spec.revisit_on)
        v = verdict_logic.decide(comparisons, pb.verdict, failure=failure, confounded_by=confounded,
                                 correctness=correctness, revisit_on=revisit,
                                 primary_workload=next(iter(pb.workloads)))
        store.record_verdict(eid, v)
        return {}

    # ---------------------------------------------------------------- record
    def record(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store, pb = state["campaign_id"], state["current"], self.d.store, self.d.playbook
        eid = cur["experiment_id"]
        v = store.get_verdict(eid)
        spec = store.hypothesis_spec(cid, cur["hypothesis"])
        adopt = v.kind == "win" and spec.adopt_if_win
        store.finish_experiment(eid, "failed" if v.failure_class else "finished", adopted=adopt)
        store.set_hypothesis_status(cid, spec.name, "done")
        self.d.events("verdict", {"hypothesis": spec.name, "kind": v.kind, "reason": v.reason,
                                  "failure_class": v.failure_class.value if v.failure_class else None})
        update: dict[str, Any] = {
            "experiments_done": state.get("experiments_done", 0) + 1,
            "no_win_streak": 0 if v.kind == "win" else state.get("no_win_streak", 0) + 1,
            "dead_end_streak": 0 if v.kind == "win" else state.get("dead_end_streak", 0) + (v.kind == "dead_end"),
            "current": None,
        }
        if adopt:
            config = hypothesis_config(EffectiveConfig.model_validate(state["baseline_config"]), spec)
            update.update(baseline_config=config.model_dump(), need_baseline=f"adopted win '{spec.name}'")
            store.add_event(cid, "adopt", f"'{spec.name}' adopted: it is the baseline for every later hypothesis")
        merged = {**state, **update}
        halt = halt_after_verdict(merged, pb, hours_spent=store.node_seconds(cid) / 3600)
        if halt:
            update["halt"] = halt
        return update

    # ---------------------------------------------------------------- render
    def render(self, state: CampaignState) -> dict[str, Any]:
        self._render(state["campaign_id"])
        return {}

    def _render(self, cid: str) -> None:
        from campaign.publish import publish_journal

        publish_journal(self.d.store, cid, self.d.journal_path, db_label=self.d.db_label)

    # ---------------------------------------------------------------- review
    def review(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        reason = (state.get("halt") or {}).get("reason", "review requested")
        seq = store.request_review(cid, reason)
        store.update_campaign(cid, status="awaiting_review", halt_reason=reason)
        self._render(cid)
        decision = interrupt({"kind": "review", "seq": seq, "reason": reason})
        store.decide_review(cid, seq, decision)
        for raw in decision.get("add_hypotheses") or []:
            store.add_hypothesis(cid, HypothesisSpec.model_validate(raw), source="review")
        if decision.get("decision") == "reject":
            store.update_campaign(cid, status="finished", halt_reason=f"stopped at review: {reason}")
            self._render(cid)
            return {"halt": None, "finished": True}
        store.update_campaign(cid, status="running", halt_reason=None)
        return {"halt": None, "no_win_streak": 0, "dead_end_streak": 0}

    # ---------------------------------------------------------------- finish
    def finish(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        halt = state.get("halt") or {}
        if halt.get("kind") == "fail":
            store.update_campaign(cid, status="failed", halt_reason=halt.get("reason"))
        else:
            store.update_campaign(cid, status="finished",
                                  halt_reason=halt.get("reason") or "hypothesis queue exhausted")
        self._render(cid)
        return {"finished": True}


def correctness_prompts(pb) -> list[str] | None:
    spec = pb.verdict.correctness
    if not spec.enabled:
        return None
    from tools.prompts import correctness_prompt_set

    return correctness_prompt_set(spec.prompts)


__all__ = ["Nodes", "FailureClass"]
