"""Did every launch that a comparison reads do the same work?  (`campaign.domain.work`)

Three readers compare launches: an experiment's verdict (its two sides, or the campaign
baseline's launches where it has none of its own), the node's noise model and the drift
check (every baseline launch of the campaign).  Each reads only launches of one work:
the verdict of an experiment that straddles a change (measured, stopped, the playbook
edited or `campaign` upgraded, resumed) is not a result; the noise model and the drift
check read only the work the playbook asks for now; and a campaign baseline measured
with other work is measured again before the next hypothesis.
"""

from __future__ import annotations

import json
from functools import lru_cache

from campaign.domain.measurement import Measurement
from campaign.domain.models import WorkloadSpec
from campaign.domain.prompts import build_prompt_set
from campaign.domain.work import Work, sweep_work, work_of
from campaign.playbook.schema import Playbook
from campaign.ports.store import LoopStore

__all__ = ["asked_work", "expected_keys", "expected_work", "measurement_work", "mixed_work", "stale_baseline"]


def expected_work(pb: Playbook) -> dict[str, Work]:
    """The work each of the playbook's workloads does today."""
    return {name: _work(json.dumps(w.model_dump(mode="json"), sort_keys=True)) for name, w in pb.workloads.items()}


def expected_keys(pb: Playbook) -> dict[str, str]:
    """`expected_work` as the keys the store records (`Store.side_values(work=...)`)."""
    return {name: w.key for name, w in expected_work(pb).items()}


@lru_cache(maxsize=32)
def _work(spec_json: str) -> Work:
    """Cached on the workload's JSON: a JSONL prompt set is read once per spec, not once
    per decision (an edited file under the same path is read again in the next run)."""
    spec = WorkloadSpec.model_validate(json.loads(spec_json))
    return work_of(spec, build_prompt_set(spec).hash)


def measurement_work(m: Measurement) -> dict[str, Work]:
    """What each sweep of a launch did (sweeps that do not name their workload: none)."""
    return {name: w for name, sweep in m.sweeps.items() if (w := sweep_work(sweep)) is not None}


def mixed_work(store: LoopStore, experiment: str) -> list[str]:
    """Workloads whose launches in this comparison did not all do the same work: the
    experiment's own launches of both sides, and the campaign baseline's launches where
    the experiment has no baseline side of its own (`Store.level_samples` reads those)."""
    runs = list(store.runs_for(experiment))
    if not any(r.side == "baseline" for r in runs):
        ref = store.get_experiment(experiment).baseline_ref
        if ref:
            runs += [r for r in store.runs_for(ref, "baseline")]
    keys: dict[str, set[str]] = {}
    for r in runs:
        keys.setdefault(r.workload, set()).add(r.work)
    return sorted(name for name, seen in keys.items() if len(seen) > 1)


def stale_baseline(store: LoopStore, baseline_id: str | None, pb: Playbook) -> str | None:
    """Why the campaign baseline no longer compares with today's launches (its recorded
    work is not the playbook's now), in words; None when it does, and None for a baseline
    that was asked for today's work already (its `asked_work`): measuring again would not
    change what a node that does other work records, and would repeat after every
    experiment."""
    if not baseline_id:
        return None
    now = expected_work(pb)
    asked = store.get_artifact(baseline_id, "asked_work")
    if asked is not None and json.loads(asked) == {name: w.key for name, w in now.items()}:
        return None
    recorded: dict[str, set[str]] = {}
    for r in store.runs_for(baseline_id, "baseline"):
        recorded.setdefault(r.workload, set()).add(r.work)
    off = sorted(name for name, keys in recorded.items() if name in now and keys != {now[name].key})
    if not off:
        return None
    text = store.launch_artifact(baseline_id, "work", side="baseline", repeat=0)
    was = {k: Work.model_validate(v) for k, v in json.loads(text).items()} if text else {}
    parts = []
    for name in off:
        what = now[name].differences(was[name]) if name in was else []
        parts.append(
            f"{name}: {'; '.join(what)}"
            if what
            else f"{name}: measured by an earlier campaign version (its prompt order, protocol 1)"
        )
    return f"the work changed since baseline {baseline_id} was measured ({', '.join(parts)})"


def asked_work(pb: Playbook) -> str:
    """The `asked_work` artifact of a baseline measurement: the work keys it was asked for."""
    return json.dumps(expected_keys(pb), sort_keys=True)
