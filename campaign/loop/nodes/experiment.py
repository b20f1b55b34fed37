"""One experiment: apply the hypothesis' config, measure interleaved rounds, decide the
verdict (a pure function of the record and the policy), record it and adopt a win."""

from __future__ import annotations

from typing import Any

from campaign.domain.models import EffectiveConfig
from campaign.domain.source import PatchFailed
from campaign.loop import source
from campaign.loop.drift_check import check_drift
from campaign.loop.experiment import (
    confound_changes,
    confound_check,
    correctness_of,
    finish_recorded,
    hypothesis_config,
    node_noise,
    provenance_notes,
    record_measurement,
    recorded_failure,
    workloads_of,
)
from campaign.loop.nodes.base import NodeFamily, correctness_prompts, reference_config
from campaign.loop.planner_bridge import triage_measurement
from campaign.loop.routing import halt_after_verdict
from campaign.loop.state import CampaignState, current_of
from campaign.loop.work_check import expected_keys, mixed_work, stale_baseline
from campaign.verdict import gates
from campaign.verdict.judge import judge, round_decision, rounds_story
from campaign.verdict.noise import NodeNoise
from campaign.verdict.revisit import revisit_components

__all__ = ["ExperimentNodes"]


def _reported_baseline(state: CampaignState) -> str | None:
    """Whose reported config stands in for a round without an interleaved baseline side:
    the campaign baseline's, unless the experiment compares with another config."""
    return None if current_of(state).get("reference_config") else state.get("baseline_id")


class ExperimentNodes(NodeFamily):
    def apply(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store = state["campaign_id"], current_of(state), self.d.store
        spec = self._spec(cid, cur["hypothesis"])
        base = reference_config(state)
        config = hypothesis_config(base, spec)
        exp = store.start_experiment(
            cid,
            spec.name,
            config=config,
            role="candidate",
            node=self._node(state).name,
            attempt=cur["attempt"],
            baseline_ref=state.get("baseline_id"),
            fingerprint_id=state.get("fingerprint_id"),
        )
        diff = confound_changes(base, config, None)
        store.record_artifact(exp.id, "config_diff", "\n".join(c.model_dump_json() for c in diff))
        shas = self._trees(state, exp.id, spec)
        # candidate first: an idea that crashes at start costs one launch, not a baseline round too
        return {"current": {**cur, "experiment_id": exp.id, "side": "candidate", **shas}}

    def _trees(self, state: CampaignState, eid: str, spec: Any) -> dict[str, Any]:
        """The commits both sides run from (server.source set): the patches are committed
        here, their record written before anything runs; a patch that is refused or does
        not apply is the candidate's recorded failure."""
        store = self.d.store
        own = source.baseline_side_patches(state) + source.spec_patches(spec)
        try:
            base_rec = source.prepare(self.d, state, "baseline", source.baseline_side_patches(state))
            rec = source.prepare(self.d, state, spec.name, own)
        except PatchFailed as exc:
            if recorded_failure(store, eid) is None:
                record_measurement(store, eid, "candidate", 0, source.failed(exc), self._node(state).name)
            return {"candidate_sha": None, "baseline_sha": None}
        if rec is None or base_rec is None:
            return {}
        store.record_artifact(eid, "patch", rec.model_dump_json())
        if rec.branch:
            store.annotate_experiment(eid, patch_sha=rec.sha)
        return {"candidate_sha": rec.sha, "baseline_sha": base_rec.sha}

    def measure(self, state: CampaignState) -> dict[str, Any]:
        """One side of one round: launch, correctness probe (round 0), workloads, stop, record."""
        cid, store, pb = state["campaign_id"], self.d.store, self.pb
        cur: dict[str, Any] = dict(current_of(state))
        side, rnd, eid = cur["side"], cur["rounds"], cur["experiment_id"]
        spec = self._spec(cid, cur["hypothesis"])
        base = reference_config(state)
        config = base if side == "baseline" else hypothesis_config(base, spec)
        if not store.has_side(eid, side, rnd) and recorded_failure(store, eid) is None:
            m = source.measure_from(
                self.d,
                state,
                cur.get(f"{side}_sha"),
                config,
                workloads_of(pb),
                label=f"{spec.name}-{side}-r{rnd}",
                correctness_prompts=correctness_prompts(pb) if rnd == 0 else None,
                correctness_tokens=pb.verdict.correctness.max_tokens,
            )
            if (
                m.failure is not None
                and m.infrastructure_fault
                and cur.get("infra_retries", 0) < pb.budget.max_infra_retries
            ):
                store.add_event(
                    cid, "infrastructure", f"{spec.name} {side} r{rnd}: {m.failure.failure_class.value}, retrying"
                )
                return {"current": {**cur, "infra_retries": cur.get("infra_retries", 0) + 1}}
            record_measurement(store, eid, side, rnd, triage_measurement(self.d, cid, m), self._node(state).name)
        if recorded_failure(store, eid) is not None:
            return {"current": {**cur, "failed": True, "side": ""}}
        if side == "baseline" and not cur.get("reference_config"):
            check_drift(
                store,
                cid,
                state.get("baseline_id"),
                eid,
                rnd,
                pb.verdict.metric,
                self._noise(state, exclude=eid),
                work=expected_keys(pb),
            )
        if side == "candidate" and pb.verdict.interleave and not store.has_side(eid, "baseline", rnd):
            return {"current": {**cur, "side": "baseline"}}  # the other half of this round (C B, C B, ...)
        rounds = rnd + 1
        confounded = bool(confound_check(store, eid, base, spec, _reported_baseline(state)).confounded_by)
        decision = round_decision(
            store.level_samples(eid), pb.verdict, rounds, confounded=confounded, noise=self._noise(state, exclude=eid)
        )
        nxt = "candidate" if decision.more else ""
        if decision.because:
            store.record_artifact(eid, "round_reason", decision.because, seq=rounds + 1)
        if not decision.more:
            extra = {r: why for r in range(2, rounds + 1) if (why := store.get_artifact(eid, "round_reason", r))}
            store.record_artifact(eid, "stop_reason", rounds_story(decision.why, extra))
        self.d.events("round", {"hypothesis": spec.name, "round": rounds, "more": decision.more})
        return {"current": {**cur, "rounds": rounds, "side": nxt}}

    def _noise(self, state: CampaignState, exclude: str) -> NodeNoise:
        """The node's noise, with the baseline's recent level unless this experiment
        compares with another config (a stack check against the original baseline)."""
        baseline = None if current_of(state).get("reference_config") else state.get("baseline_id")
        return node_noise(
            self.d.store,
            state["campaign_id"],
            self._node(state).name,
            state.get("fingerprint_id"),
            self.pb.verdict.metric,
            exclude=exclude,
            baseline=baseline,
            work=expected_keys(self.pb),
        )

    def verdict(self, state: CampaignState) -> dict[str, Any]:
        """A pure function of the recorded measurements and the policy."""
        cid, cur, store, pb = state["campaign_id"], current_of(state), self.d.store, self.pb
        eid = cur["experiment_id"]
        spec = self._spec(cid, cur["hypothesis"])
        failure = recorded_failure(store, eid)
        base = reference_config(state)
        confound = confound_check(store, eid, base, spec, _reported_baseline(state))
        samples = [] if failure else store.level_samples(eid)
        correctness = None if failure else correctness_of(store, eid, state.get("baseline_id"), pb)
        revisit = revisit_components(failure.failure_class if failure else None, spec.revisit_on)
        v = judge(
            samples,
            pb.verdict,
            self._noise(state, exclude=eid),
            failure=failure,
            confounded_by=confound.confounded_by,
            correctness=correctness,
            revisit_on=revisit,
            primary_workload=pb.headline_workload,
            reported_diff=confound.reported_diff,
        )
        v.stopped = store.get_artifact(eid, "stop_reason") or ""
        if not failure:
            v.notes = [n for n in (v.noise, f"rounds: {v.stopped}" if v.stopped else "") if n]
            v.notes += provenance_notes(store, eid, pb, dict(v.regimes))
            v = gates.same_work(v, mixed_work(store, eid))
        store.record_verdict(eid, v)
        return {}

    def record(self, state: CampaignState) -> dict[str, Any]:
        cid, cur, store, pb = state["campaign_id"], current_of(state), self.d.store, self.pb
        eid = cur["experiment_id"]
        v = store.get_verdict(eid)
        if v is None:
            raise RuntimeError(f"graph: record ran before the verdict of {eid}")
        spec = self._spec(cid, cur["hypothesis"])
        adopt = v.kind == "win" and spec.adopt_if_win
        finish_recorded(store, eid)
        if adopt:
            store.set_adopted(eid, True)
        store.set_hypothesis_status(cid, spec.name, "done")
        self.d.events(
            "verdict",
            {
                "hypothesis": spec.name,
                "kind": v.kind,
                "reason": v.reason,
                "failure_class": v.failure_class.value if v.failure_class else None,
            },
        )
        counts = store.loop_tally(cid)  # kept with the record: a lost update cannot skew them
        update: dict[str, Any] = {
            "experiments_done": counts.experiments_done,
            "no_win_streak": counts.no_win,
            "dead_end_streak": counts.dead_end,
            "current": None,
        }
        if adopt:
            config = hypothesis_config(EffectiveConfig.model_validate(state["baseline_config"]), spec)
            update.update(
                baseline_config=config.model_dump(),
                need_baseline=f"adopted win '{spec.name}'",
                baseline_patches=list(state.get("baseline_patches") or []) + source.spec_patches(spec),
            )
            store.add_event(
                cid, "adopt", f"'{spec.name}' adopted: the baseline for every later hypothesis", key=f"adopt:{eid}"
            )
        elif why := stale_baseline(store, state.get("baseline_id"), pb):
            update["need_baseline"] = why  # the playbook's work changed while this experiment ran
        if self.d.planner is not None:
            from campaign.loop.planner_bridge import analyze_with_planner

            analyze_with_planner(self.d, cid, eid)
        halt = halt_after_verdict(
            {**state, **update},  # type: ignore[typeddict-item]
            pb,
            hours_spent=counts.node_seconds / 3600,
            queue_hours=counts.queue_seconds / 3600,
        )
        if halt:
            update["halt"] = halt
        return update
