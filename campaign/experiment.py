"""Helpers the nodes share: ids, configs, confound detection, recording a measurement."""

from __future__ import annotations

import json
from typing import Any

from campaign.playbook import HypothesisSpec, Playbook
from campaign.records import CorrectnessResult
from tools.config_edit import diff, merge, undeclared
from tools.models import ConfigChange, EffectiveConfig, WorkloadSpec
from tools.node_runtime import Measurement


def experiment_id(campaign_id: str, hypothesis: str, attempt: int) -> str:
    return f"{campaign_id}/{hypothesis}#{attempt}"


def workloads_of(pb: Playbook) -> list[WorkloadSpec]:
    return [WorkloadSpec.model_validate(w.model_dump()) for w in pb.workloads.values()]


def hypothesis_config(baseline: EffectiveConfig, spec: HypothesisSpec) -> EffectiveConfig:
    return merge(baseline, spec.flags, spec.env, spec.unset_flags)


def confound_changes(baseline: EffectiveConfig, candidate: EffectiveConfig,
                     spec: HypothesisSpec | None) -> list[ConfigChange]:
    """With a spec: the changes the hypothesis did not declare (a confounded run).
    Without: the whole diff (for the record)."""
    changes = diff(baseline, candidate)
    if spec is None:
        return changes
    return undeclared(changes, spec.declared_keys())


def record_measurement(store: Any, experiment: str, side: str, repeat: int, m: Measurement, node: str) -> None:
    """Write every level of every workload, the command and the evidence: before any decision."""
    for name, sweep in m.sweeps.items():
        for level in sweep.levels:
            store.record_run(experiment, side, repeat, name, level, prompt_set_hash=sweep.prompt_set_hash, node=node)
    store.record_artifact(experiment, f"command:{side}", m.command, seq=repeat)
    if m.log_excerpt:
        store.record_artifact(experiment, f"log:{side}", "\n".join(m.log_excerpt), seq=repeat)
    if m.outputs is not None:
        store.record_artifact(experiment, f"outputs:{side}", json.dumps(m.outputs), seq=repeat)
    if m.reported is not None:
        store.record_artifact(experiment, f"reported_config:{side}", m.reported.model_dump_json(), seq=repeat)
    store.add_node_seconds(experiment, side, repeat, m.node_seconds)


def correctness_of(store: Any, experiment: str, baseline_id: str | None, pb: Playbook) -> CorrectnessResult | None:
    """Compare the candidate's greedy outputs with the baseline's (same node, same prompts)."""
    from tools.correctness import compare_outputs

    spec = pb.verdict.correctness
    if not spec.enabled:
        return None
    cand = store.get_artifact(experiment, "outputs:candidate", seq=0)
    base = store.get_artifact(experiment, "outputs:baseline", seq=0)
    if base is None and baseline_id:
        base = store.get_artifact(baseline_id, "outputs:baseline", seq=0)
    if cand is None or base is None:
        return None
    return compare_outputs(json.loads(base), json.loads(cand), spec.tolerance)


def baseline_samples_for(store: Any, baseline_id: str | None):
    return store.level_samples(baseline_id) if baseline_id else []
