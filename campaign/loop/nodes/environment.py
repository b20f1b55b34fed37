"""Environment nodes: fingerprint the node (a changed component re-measures the
baseline and re-opens the dead ends tied to it) and measure the baseline."""

from __future__ import annotations

from typing import Any

from campaign.domain.models import EffectiveConfig
from campaign.domain.source import PatchFailed
from campaign.loop import source
from campaign.loop.experiment import (
    finish_recorded,
    node_noise,
    record_measurement,
    recorded_failure,
    workloads_of,
)
from campaign.loop.nodes.base import NodeFamily, correctness_prompts
from campaign.loop.planner_bridge import triage_measurement
from campaign.loop.state import CampaignState
from campaign.loop.work_check import asked_work, expected_keys, stale_baseline
from campaign.verdict.noise import baseline_launches
from campaign.verdict.revisit import changed_components, fills_in

__all__ = ["EnvironmentNodes"]


class EnvironmentNodes(NodeFamily):
    def fingerprint(self, state: CampaignState) -> dict[str, Any]:
        """Record the node's environment; a changed component re-measures the baseline
        and re-opens the dead ends whose revisit condition names it."""
        cid, store = state["campaign_id"], self.d.store
        previous = store.latest_fingerprint(cid)
        fp = self._node(state).fingerprint()
        if sha := source.base_sha(self.d, state):  # the engine's source is part of its environment
            fp = fp.model_copy(update={"engine_sha": sha})
        fid = store.record_fingerprint(cid, fp)  # the store writes the "environment changed" event
        if previous is None:
            return {"env_changed": [], "fingerprint_id": fid}
        changed = changed_components(previous, fp)
        if not changed:
            kept = state.get("fingerprint_id")
            was = store.get_fingerprint(cid, kept) if kept and kept != fid else None
            if kept and was is not None and fills_in(was, fp):
                fid = kept  # unknowns now read: the same environment, its noise history goes on
            return {"env_changed": [], "fingerprint_id": fid}
        reopened = self._reopen(cid, changed)
        what = ", ".join(f"{c} {previous.components().get(c, '?')} -> {fp.components().get(c, '?')}" for c in changed)
        self.d.events("environment", {"changed": what, "reopened": reopened})
        update: dict[str, Any] = {
            "env_changed": changed,
            "need_baseline": f"environment change: {what}",
            "fingerprint_id": fid,
            "no_win_streak": 0,
            "dead_end_streak": 0,
        }
        if self.pb.review.on_environment_change:
            update["halt"] = {"kind": "review", "reason": f"environment changed: {what}"}
        return update

    def _reopen(self, cid: str, changed: list[str]) -> list[str]:
        store, out = self.d.store, []
        for h in store.list_hypotheses(cid, status="done"):
            exps = [e for e in store.list_experiments(cid, hypothesis=h.name) if e.status in ("finished", "failed")]
            v = store.get_verdict(exps[-1].id) if exps else None
            due = v is not None and v.kind == "dead_end" and set(v.revisit_on or h.spec.revisit_on) & set(changed)
            if due and store.reopen_hypothesis(cid, h.name):
                out.append(h.name)
        if out:
            store.add_event(cid, "reopen", "re-opened dead ends: " + ", ".join(out))
        return out

    def baseline(self, state: CampaignState) -> dict[str, Any]:
        cid, store, pb = state["campaign_id"], self.d.store, self.pb
        stale = None
        if state.get("baseline_id") and not state.get("need_baseline"):
            # a baseline measured with other work than the playbook's now (edited, or
            # `campaign` upgraded across a protocol change) compares with nothing new
            stale = stale_baseline(store, state.get("baseline_id"), pb)
            if stale is None:
                return {}
        config = EffectiveConfig.model_validate(
            state.get("baseline_config") or {"flags": pb.baseline.flags, "env": pb.baseline.env}
        )
        reason = state.get("need_baseline") or stale or "campaign start"
        attempt = state.get("baseline_attempt", 0) + 1
        exp = store.start_experiment(
            cid,
            "baseline",
            config=config,
            role="baseline",
            node=self._node(state).name,
            attempt=attempt,
            reason=reason,
            fingerprint_id=state.get("fingerprint_id"),
        )
        eid = exp.id
        if exp.status == "running":
            store.record_artifact(eid, "asked_work", asked_work(pb))  # what it was asked to measure
            self.d.events("baseline", {"reason": reason, "experiment": eid})
            try:
                rec = source.prepare(self.d, state, "baseline", list(state.get("baseline_patches") or []))
            except PatchFailed as exc:  # adopted patches that no longer apply to the moved base
                rec = None
                if recorded_failure(store, eid) is None:
                    record_measurement(store, eid, "baseline", 0, source.failed(exc), self._node(state).name)
            if rec is not None:
                store.record_artifact(eid, "patch", rec.model_dump_json())
            known = node_noise(
                store,
                cid,
                self._node(state).name,
                state.get("fingerprint_id"),
                pb.verdict.metric,
                exclude=eid,
                work=expected_keys(pb),
            )
            for r in range(baseline_launches(pb.verdict.repeats, known, list(pb.workloads))):  # the node's noise floor
                if store.has_side(eid, "baseline", r) or recorded_failure(store, eid) is not None:
                    continue
                m = source.measure_from(
                    self.d,
                    state,
                    rec.sha if rec else None,
                    config,
                    workloads_of(pb),
                    label=f"baseline{attempt}-r{r}",
                    correctness_prompts=correctness_prompts(pb) if r == 0 else None,
                    correctness_tokens=pb.verdict.correctness.max_tokens,
                )
                record_measurement(
                    store, eid, "baseline", r, triage_measurement(self.d, cid, m), self._node(state).name
                )
                if m.failure:
                    break
            finish_recorded(store, eid)
        failure = recorded_failure(store, eid)
        if failure is not None:
            reason = f"the baseline does not run: {failure.failure_class.value}: {failure.summary}"
            store.update_campaign(cid, status="failed", halt_reason=reason)
            return {"baseline_attempt": attempt, "halt": {"kind": "fail", "reason": reason}}
        store.update_campaign(cid, baseline_experiment_id=eid)
        store.add_event(cid, "baseline", f"baseline {eid} measured ({reason})", key=f"baseline:{eid}")
        self._render(cid)
        return {
            "baseline_id": eid,
            "baseline_attempt": attempt,
            "need_baseline": None,
            "baseline_config": config.model_dump(),
        }
