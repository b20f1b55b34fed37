"""The loop's own CPU per experiment on top of an N-experiment campaign (`bench/scale.py`).

The campaign is built by `scale_build`; then K more hypotheses go through the loop's
own graph nodes (propose, gate, apply, measure per side and round as the router sends
them, verdict, record), called as the graph calls them, under a playbook that sets every
budget `record` checks (node hours and scheduler-queue hours, neither reached).  The node is `BenchNode`: it
answers a launch at once with figures like the build's, so what the clock sees is the
loop's own work (reads, noise model, verdict, writes), not a server's.  The journal's
per-verdict update is timed apart (`bench/scale.py`'s update).  Process CPU time, not
wall time: the machine is shared.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.scale_build import FP, PLAYBOOK, _level, _truth
from campaign.domain.measurement import Measurement
from campaign.domain.models import EffectiveConfig, Fingerprint, SweepResult, WorkloadSpec
from campaign.domain.prompts import build_prompt_set
from campaign.loop import routing
from campaign.loop.deps import Deps
from campaign.loop.nodes import Nodes
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.store import Store

__all__ = ["BenchNode", "decided", "loop_cpu", "start_state"]

EFFECTS = [1.04, 1.0, 0.95, 1.003]  # a win, two inconclusives, a dead end


class BenchNode:
    """The build's node (`gpu-node-1`, its fingerprint): every launch measures at once."""

    name = "gpu-node-1"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.effect = 1.0

    def fingerprint(self) -> Fingerprint:
        return FP

    def measure(
        self,
        config: EffectiveConfig,
        workloads: list[WorkloadSpec],
        *,
        label: str,
        correctness_prompts: list[str] | None = None,
        correctness_tokens: int = 16,
        source: str | None = None,
    ) -> Measurement:
        effect = self.effect if "-candidate-" in label else 1.0
        sweeps = {
            w.name: SweepResult(
                workload=w,
                prompt_set_hash=build_prompt_set(w).hash,
                protocol=2,
                levels=[
                    _level(self.rng, c, _truth(w.name, c) * effect * self.rng.gauss(1, 0.01)) for c in w.concurrency
                ],
            )
            for w in workloads
        }
        outputs = [f"answer {i}" for i in range(len(correctness_prompts))] if correctness_prompts else None
        return Measurement(
            sweeps=sweeps, outputs=outputs, command=f"bench launch {label}", node_seconds=90.0, queue_seconds=30.0
        )


def start_state(store: Store, cid: str) -> dict[str, Any]:
    """The graph's state after the campaign's baseline: what the first `propose` sees."""
    base = store.get_experiment(store.get_campaign(cid).baseline_experiment_id or "")
    return {
        "campaign_id": cid,
        "baseline_id": base.id,
        "fingerprint_id": base.fingerprint_id,
        "baseline_config": base.config.model_dump(),
        "baseline_patches": [],
    }


def decided(nodes: Nodes, state: dict[str, Any], max_rounds: int) -> dict[str, Any]:
    """One hypothesis through the loop's nodes up to its verdict, as the graph routes it
    (`record` is next)."""
    state = {**state, **nodes.propose(state)}  # type: ignore[arg-type]
    state.update(nodes.gate(state))  # type: ignore[arg-type]
    state.update(nodes.apply(state))  # type: ignore[arg-type]
    while True:
        state.update(nodes.measure(state))  # type: ignore[arg-type]
        if routing.after_measure(state, max_rounds) == "verdict":  # type: ignore[arg-type]
            break
    state.update(nodes.verdict(state))  # type: ignore[arg-type]
    return state


def _experiment(nodes: Nodes, state: dict[str, Any], max_rounds: int) -> dict[str, Any]:
    state = decided(nodes, state, max_rounds)
    state.update(nodes.record(state))  # type: ignore[arg-type]
    return state


def loop_cpu(db: Path, cid: str, k: int) -> dict[str, float]:
    """Median process CPU seconds of one experiment through the loop's nodes (K timed,
    after one that warms imports and caches), and its spread."""
    pb = Playbook.model_validate({**PLAYBOOK, "budget": {"max_hours": 1e6, "max_queue_hours": 1e6}})
    node = BenchNode(seed=k)
    with Store(db) as store:
        state = start_state(store, cid)
        names = [f"loop-bench-{i}" for i in range(k + 1)]
        for i, name in enumerate(names):
            store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags={"loop-bench-knob": i}))
        nodes = Nodes(Deps(playbook=pb, store=store, nodes=[node], journal_path=None))
        cpu = []
        for i, _ in enumerate(names):
            node.effect = EFFECTS[i % len(EFFECTS)]
            c0 = time.process_time()
            state = {**_experiment(nodes, state, pb.verdict.repeats.max), "halt": None}
            if i:
                cpu.append(time.process_time() - c0)
        assert store.loop_tally(cid) == store.recount_tally(cid), "the kept counts drifted from the records"
    return {"loop_cpu_s": round(statistics.median(cpu), 4), "loop_cpu_max_s": round(max(cpu), 4), "loop_experiments": k}
