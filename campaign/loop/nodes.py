"""The graph's nodes.  Each reads the state, calls one tool or one pure function,
writes what it learned to the store, and returns a partial state update.

Everything a node writes is an idempotent upsert keyed by ids that the state
already holds (explicit attempt numbers, side/repeat keys), because a node
interrupted by a crash runs again from its top on resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from campaign.verdict import rule as verdict_logic
from campaign.loop.deps import Deps
from campaign.loop.experiment import (
    baseline_noise,
    check_drift,
    confound_changes,
    correctness_of,
    hypothesis_config,
    noise_floors,
    node_seconds_of,
    provenance_notes,
    record_measurement,
    recorded_failure,
    workloads_of,
)
from campaign.playbook.schema import HypothesisSpec
from campaign.verdict.revisit import changed_components, revisit_components
from campaign.loop.routing import halt_after_verdict
from campaign.loop.state import CampaignState
from campaign.domain.models import EffectiveConfig


class Nodes:
    def __init__(self, deps: Deps) -> None:
        self.d = deps

    @property
    def pb(self):
        return self.d.playbook

    def _node(self, state: CampaignState):
        """The node this step runs on: `node_index` is set per branch when hypotheses
        fan out over several nodes; the first node otherwise."""
        return self.d.nodes[state.get("node_index") or 0]

    def _spec(self, cid: str, name: str) -> HypothesisSpec:
        return self.d.store.get_hypothesis(cid, name).spec

    # ----------------------------------------------------------- environment
    def fingerprint(self, state: CampaignState) -> dict[str, Any]:
        """Record the node's environment; a changed component re-measures the baseline
        and re-opens the dead ends whose revisit condition names it."""
        cid, store = state["campaign_id"], self.d.store
        previous = store.latest_fingerprint(cid)
        fp = self._node(state).fingerprint()
        fid = store.record_fingerprint(cid, fp)  # the store writes the "environment changed" event
        if previous is None:
            return {"env_changed": [], "fingerprint_id": fid}
        changed = changed_components(previous, fp)
        if not changed:
            return {"env_changed": [], "fingerprint_id": fid}
        reopened = self._reopen(cid, changed)
        what = ", ".join(f"{c} {previous.components().get(c, '?')} -> {fp.components().get(c, '?')}" for c in changed)
        self.d.events("environment", {"changed": what, "reopened": reopened})
        update: dict[str, Any] = {"env_changed": changed, "need_baseline": f"environment change: {what}",
                                  "fingerprint_id": fid,
                                  "no_win_streak": 0, "dead_end_streak": 0}
        if self.pb.review.on_environment_change:
            update["halt"] = {"kind": "review", "reason": f"environment changed: {what}"}
        return update

    def _reopen(self, cid: str, changed: list[str]) -> list[str]:
        store, out = self.d.store, []
        for h in store.list_hypotheses(cid, status="done"):
            exps = [e for e in store.list_experiments(cid, hypothesis=h.name) if e.status in ("finished", "failed")]
            v = store.get_verdict(exps[-1].id) if exps else None
            if v is not None and v.kind == "dead_end" and set(v.revisit_on or h.spec.revisit_on) & set(changed):
                if store.reopen_hypothesis(cid, h.name):
                    out.append(h.name)
        if out:
            store.add_event(cid, "reopen", "re-opened dead ends: " + ", ".join(out))
        return out

    # -------------------------------------------------------------- baseline
    def baseline(self, state: CampaignState) -> dict[str, Any]:
        if state.get("baseline_id") and not state.get("need_baseline"):
            return {}
        cid, store, pb = state["campaign_id"], self.d.store, self.pb
        config = EffectiveConfig.model_validate(state.get("baseline_config") or
                                                {"flags": pb.baseline.flags, "env": pb.baseline.env})
        reason = state.get("need_baseline") or "campaign start"
        attempt = state.get("baseline_attempt", 0) + 1
        exp = store.start_experiment(cid, "baseline", config=config, role="baseline", node=self._node(state).name,
                                     attempt=attempt, reason=reason, fingerprint_id=state.get("fingerprint_id"))
        eid = exp.id
        if exp.status == "running":
            self.d.events("baseline", {"reason": reason, "experiment": eid})
            for r in range(max(2, pb.verdict.repeats.min)):  # two at least: the node's noise floor
                if store.has_side(eid, "baseline", r):
                    continue
                m = self._node(state).measure(config, workloads_of(pb), label=f"baseline{attempt}-r{r}",
                                        correctness_prompts=correctness_prompts(pb) if r == 0 else None,
                                        correctness_tokens=pb.verdict.correctness.max_tokens)
                record_measurement(store, eid, "baseline", r, m, self._node(state).name)
                if m.failure:
                    break
            failure = recorded_failure(store, eid)
            store.finish_experiment(eid, "failed" if failure else "finished", failure=failure,
                                    node_seconds=node_seconds_of(store, eid))
        failure = recorded_failure(store, eid)
        if failure is not None:
            reason = f"the baseline does not run: {failure.failure_class.value}: {failure.summary}"
            store.update_campaign(cid, status="failed", halt_reason=reason)
            return {"baseline_attempt": attempt, "halt": {"kind": "fail", "reason": reason}}
        store.update_campaign(cid, baseline_experiment_id=eid)
        store.add_event(cid, "baseline", f"baseline {eid} measured ({reason})", key=f"baseline:{eid}")
        self._render(cid)
        return {"baseline_id": eid, "baseline_attempt": attempt, "need_baseline": None,
                "baseline_config": config.model_dump()}

    # --------------------------------------------------------------- propose
    def propose(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        rec = store.next_queued_hypothesis(cid)
        spec = rec.spec if rec is not None else None
        if spec is None and self.d.planner is not None:
            from campaign.loop.planner_bridge import propose_with_planner

            spec = propose_with_planner(self.d, cid)
        if spec is None:
            return {"current": None}
        store.set_hypothesis_status(cid, spec.name, "running")
        attempt = len(store.list_experiments(cid, hypothesis=spec.name)) + 1
        self.d.events("hypothesis", {"name": spec.name, "attempt": attempt, "rationale": spec.rationale})
        return {"current": {"hypothesis": spec.name, "attempt": attempt, "rounds": 0, "side": "",
                            "failed": False, "infra_retries": 0}}

    # ------------------------------------------------------------------ gate
    def gate(self, state: CampaignState) -> dict[str, Any]:
        """Human approval before a patch is applied (code before interrupt is idempotent)."""
        cid, cur = state["campaign_id"], state["current"]
        spec = self._spec(cid, cur["hypothesis"])
        rec = self.d.store.get_hypothesis(cid, spec.name)
        needs = (spec.patch and self.pb.review.before_patch) or (spec.patch and rec.source == "llm")
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
            self.d.store.set_hypothesis_status(cid, spec.name, "rejected",
                                               rejection_reason=decision.get("note") or "rejected at review")
            return {"current": None}
        return {}

    def _decide(self, cid: str, seq: int, decision: dict) -> None:
        added = [HypothesisSpec.model_validate(h) for h in decision.get("add_hypotheses") or []]
        self.d.store.decide_review(cid, seq, decision.get("decision") or "approve", note=decision.get("note") or "",
                                   added=added, overrides=decision.get("overrides") or None)

    # ----------------------------------------------------------------- apply
    def apply(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store = state["campaign_id"], state["current"], self.d.store
        spec = self._spec(cid, cur["hypothesis"])
        base = _base(state)
        config = hypothesis_config(base, spec)
        exp = store.start_experiment(cid, spec.name, config=config, role="candidate", node=self._node(state).name,
                                     attempt=cur["attempt"], baseline_ref=state.get("baseline_id"),
                                     fingerprint_id=state.get("fingerprint_id"))
        diff = confound_changes(base, config, None)
        store.record_artifact(exp.id, "config_diff", "\n".join(c.model_dump_json() for c in diff))
        # candidate first: an idea that crashes at start costs one launch, not a baseline round too
        return {"current": {**cur, "experiment_id": exp.id, "side": "candidate"}}

    # --------------------------------------------------------------- measure
    def measure(self, state: CampaignState) -> dict[str, Any]:
        """One side of one round: launch, correctness probe (round 0), workloads, stop, record."""
        cid, cur, store, pb = state["campaign_id"], dict(state["current"]), self.d.store, self.pb
        side, rnd, eid = cur["side"], cur["rounds"], cur["experiment_id"]
        spec = self._spec(cid, cur["hypothesis"])
        base = _base(state)
        config = base if side == "baseline" else hypothesis_config(base, spec)
        if not store.has_side(eid, side, rnd) and recorded_failure(store, eid) is None:
            m = self._node(state).measure(config, workloads_of(pb), label=f"{spec.name}-{side}-r{rnd}",
                                    correctness_prompts=correctness_prompts(pb) if rnd == 0 else None,
                                    correctness_tokens=pb.verdict.correctness.max_tokens)
            if m.infrastructure_fault and cur.get("infra_retries", 0) < pb.budget.max_infra_retries:
                store.add_event(cid, "infrastructure",
                                f"{spec.name} {side} r{rnd}: {m.failure.failure_class.value}, retrying")
                return {"current": {**cur, "infra_retries": cur.get("infra_retries", 0) + 1}}
            record_measurement(store, eid, side, rnd, m, self._node(state).name)
        if recorded_failure(store, eid) is not None:
            return {"current": {**cur, "failed": True, "side": ""}}
        if side == "baseline" and not cur.get("reference_config"):
            noise, _ = baseline_noise(store, state.get("baseline_id"), pb.verdict.metric)
            check_drift(store, cid, state.get("baseline_id"), eid, rnd, pb.verdict.metric, noise)
        if side == "candidate" and pb.verdict.interleave and not store.has_side(eid, "baseline", rnd):
            return {"current": {**cur, "side": "baseline"}}  # the other half of this round (C B, C B, ...)
        rounds = rnd + 1
        more = verdict_logic.needs_more_repeats(store.level_samples(eid), pb.verdict, rounds,
                                                **noise_floors(store, state.get("baseline_id"), pb.verdict.metric))
        more = more and rounds < pb.verdict.repeats.max
        if confound_changes(base, hypothesis_config(base, spec), spec):
            more = rounds < pb.verdict.repeats.min  # confounded: no number of repeats makes it a result
        nxt = "candidate" if more else ""
        self.d.events("round", {"hypothesis": spec.name, "round": rounds, "more": more})
        return {"current": {**cur, "rounds": rounds, "side": nxt}}

    # --------------------------------------------------------------- verdict
    def verdict(self, state: CampaignState) -> dict[str, Any]:
        """A pure function of the recorded measurements and the policy."""
        cid, cur, store, pb = state["campaign_id"], state["current"], self.d.store, self.pb
        eid = cur["experiment_id"]
        spec = self._spec(cid, cur["hypothesis"])
        failure = recorded_failure(store, eid)
        base = _base(state)
        confounded = confound_changes(base, hypothesis_config(base, spec), spec)
        comparisons = [] if failure else verdict_logic.compare_levels(
            store.level_samples(eid), pb.verdict, **noise_floors(store, state.get("baseline_id"), pb.verdict.metric))
        correctness = None if failure else correctness_of(store, eid, state.get("baseline_id"), pb)
        revisit = revisit_components(failure.failure_class if failure else None, spec.revisit_on)
        v = verdict_logic.decide(comparisons, pb.verdict, failure=failure, confounded_by=confounded,
                                 correctness=correctness, revisit_on=revisit,
                                 primary_workload=next(iter(pb.workloads)))
        if not failure:
            v.notes = provenance_notes(store, eid, pb, dict(v.regimes))
            if any("different prompt sets" in n for n in v.notes) and v.kind == "win":
                v = v.model_copy(update={"kind": "inconclusive",
                                         "reason": "not the same work: the sides ran different prompt sets"})
        store.record_verdict(eid, v)
        return {}

    # ---------------------------------------------------------------- record
    def record(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store, pb = state["campaign_id"], state["current"], self.d.store, self.pb
        eid = cur["experiment_id"]
        v = store.get_verdict(eid)
        spec = self._spec(cid, cur["hypothesis"])
        adopt = v.kind == "win" and spec.adopt_if_win
        failure = recorded_failure(store, eid)
        store.finish_experiment(eid, "failed" if failure else "finished", failure=failure,
                                node_seconds=node_seconds_of(store, eid))
        if adopt:
            store.set_adopted(eid, True)
        store.set_hypothesis_status(cid, spec.name, "done")
        self.d.events("verdict", {"hypothesis": spec.name, "kind": v.kind, "reason": v.reason,
                                  "failure_class": v.failure_class.value if v.failure_class else None})
        update: dict[str, Any] = {
            "experiments_done": state.get("experiments_done", 0) + 1,
            "no_win_streak": 0 if v.kind == "win" else state.get("no_win_streak", 0) + 1,
            "dead_end_streak": 0 if v.kind == "win" else state.get("dead_end_streak", 0) + int(v.kind == "dead_end"),
            "current": None,
        }
        if adopt:
            config = hypothesis_config(EffectiveConfig.model_validate(state["baseline_config"]), spec)
            update.update(baseline_config=config.model_dump(), need_baseline=f"adopted win '{spec.name}'")
            store.add_event(cid, "adopt", f"'{spec.name}' adopted: the baseline for every later hypothesis",
                            key=f"adopt:{eid}")
        if self.d.planner is not None:
            from campaign.loop.planner_bridge import analyze_with_planner

            analyze_with_planner(self.d, cid, eid)
        node_hours = sum(e.node_seconds for e in store.list_experiments(cid)) / 3600
        halt = halt_after_verdict({**state, **update}, pb, hours_spent=node_hours)
        if halt:
            update["halt"] = halt
        return update

    # ---------------------------------------------------------------- render
    def render(self, state: CampaignState) -> dict[str, Any]:
        self._render(state["campaign_id"])
        return {}

    def _render(self, cid: str) -> None:
        from campaign.journal.publish import publish_journal

        publish_journal(self.d.store, cid, self.d.journal_path, db_label=self.d.db_label)

    # ---------------------------------------------------------------- review
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

    # ----------------------------------------------------------------- stack
    def stack(self, state: CampaignState) -> dict[str, Any]:
        """Queue empty: do the adopted wins add up against the original baseline?  Each
        call measures nothing itself; it picks the next subset to measure (or ends)."""
        from campaign.verdict import stack_check

        cid, store, pb = state["campaign_id"], self.d.store, self.pb
        wins = stack_check.adopted_wins(store, cid)
        st = dict(state.get("stack") or {})
        if len(wins) < 2 or (st.get("for") == state.get("baseline_id") and st.get("done")):
            return {"current": None}
        if st.get("for") != state.get("baseline_id"):
            noise, _ = baseline_noise(store, state.get("baseline_id"), pb.verdict.metric)
            st = {"for": state.get("baseline_id"), "k": 0,
                  "bisect": stack_check.start(wins, max(noise or 2.0, pb.verdict.min_effect_pct)).model_dump()}
        bis = stack_check.BisectionState.model_validate(st["bisect"])
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
        return {"current": {"hypothesis": spec.name, "attempt": 1, "rounds": 0, "side": "", "failed": False,
                            "infra_retries": 0, "reference_config": original},
                "stack": {**st, "bisect": bis.model_dump(), "pending": spec.name}}

    # ---------------------------------------------------------------- finish
    def finish(self, state: CampaignState) -> dict[str, Any]:
        cid, store = state["campaign_id"], self.d.store
        halt = state.get("halt") or {}
        if state.get("finished") and store.get_campaign(cid).status == "finished":
            return {"finished": True}
        if halt.get("kind") == "fail":
            store.update_campaign(cid, status="failed", halt_reason=halt.get("reason"))
        else:
            store.update_campaign(cid, status="finished", halt_reason=halt.get("reason") or "hypothesis queue exhausted")
        self._render(cid)
        return {"finished": True}


def _base(state: CampaignState) -> EffectiveConfig:
    """What a candidate is compared with: the current baseline, or the reference config
    the experiment names (stack validation compares with the original baseline)."""
    ref = (state.get("current") or {}).get("reference_config")
    return EffectiveConfig.model_validate(ref or state["baseline_config"])


def correctness_prompts(pb) -> list[str] | None:
    spec = pb.verdict.correctness
    if not spec.enabled:
        return None
    from tools.loadgen.prompts import generate_diverse

    return generate_diverse(48, seed=20260, size=spec.prompts)
