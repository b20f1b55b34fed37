"""Hypotheses on several nodes at once: which ones may run together, and how their
results fold back into the campaign's counters.  Pure decisions, tested with plain data.

Batching rule: take queued hypotheses in queue order, up to one per node.  A *barrier*
runs alone and everything after it waits: a hypothesis that may be adopted
(`adopt_if_win`: a win changes the baseline of every later hypothesis), one with a
patch (a human approves it first, and a patched tree is one per node), or one that
depends on a hypothesis not yet done.  A barrier at the head of the queue forms a
batch of one (the sequential path); anywhere else it ends the batch before it.

Baseline per node: a batch needs `verdict.interleave` (checked when the playbook is
loaded), so every candidate is compared with baseline runs measured on its own node
within its own experiment.  The campaign-start baseline (first node) only gives the
run-to-run noise prior and the baseline shown in the journal.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from campaign.loop.routing import halt_after_verdict
from campaign.loop.state import CampaignState, Current
from campaign.playbook.schema import HypothesisSpec, Playbook


def is_barrier(spec: HypothesisSpec, done: set[str]) -> bool:
    """Must this hypothesis run alone, after everything queued before it?"""
    return bool(spec.adopt_if_win or spec.patch or set(spec.depends_on) - done)


def pick_batch(queued: list[HypothesisSpec], *, done: set[str], capacity: int) -> list[HypothesisSpec]:
    """The hypotheses to run together now, in queue order (see the module docstring)."""
    batch: list[HypothesisSpec] = []
    for spec in queued:
        if len(batch) >= capacity:
            break
        if is_barrier(spec, done):
            return batch or [spec]
        batch.append(spec)
    return batch


def collect_results(left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Reducer of the branches' results: branches append, `None` clears (the join)."""
    if right is None:
        return []
    return list(left or []) + list(right)


class BranchResult(TypedDict, total=False):
    """What one experiment branch reports to the join."""

    hypothesis: str
    experiment_id: str
    node_index: int
    node: str
    kind: str  # verdict kind
    adopted_config: dict[str, Any] | None
    need_baseline: str | None


class ParallelState(CampaignState, total=False):
    batch: list[Current]  # the hypotheses in flight on the nodes (position = node_index)
    results: Annotated[list[BranchResult], collect_results]


class BranchOutput(TypedDict, total=False):
    results: Annotated[list[BranchResult], collect_results]


def merge_results(
    state: CampaignState, results: list[BranchResult], pb: Playbook, *, hours_spent: float, queue_hours: float = 0.0
) -> dict[str, Any]:
    """Fold a batch's verdicts into the counters in queue order, as if they had run one
    after the other, then apply the review/budget policy once."""
    done = state.get("experiments_done", 0)
    nws, des = state.get("no_win_streak", 0), state.get("dead_end_streak", 0)
    update: dict[str, Any] = {}
    for r in sorted(results, key=lambda r: r.get("node_index", 0)):
        win = r.get("kind") == "win"
        done += 1
        nws = 0 if win else nws + 1
        des = 0 if win else des + int(r.get("kind") == "dead_end")
        if r.get("adopted_config"):
            update.update(baseline_config=r["adopted_config"], need_baseline=r.get("need_baseline"))
    update.update(experiments_done=done, no_win_streak=nws, dead_end_streak=des, current=None, batch=[], results=None)
    halt = halt_after_verdict(
        {**state, **update},  # type: ignore[typeddict-item]
        pb,
        hours_spent=hours_spent,
        queue_hours=queue_hours,
    )
    if halt:
        update["halt"] = halt
    return update
