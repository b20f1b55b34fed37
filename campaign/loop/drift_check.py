"""Did the node move?  The drift check the graph runs on every interleaved baseline
launch, and the note it leaves in the journal.

One launch off the baseline's level cannot tell a stall (that launch alone was slow:
1 launch in 30 on a busy node) from a move of the node (every later launch is off
too), so the note says which it can: one launch off is "a stall, or the node moved";
two launches of the same experiment in a row off the same way on a workload is "the
node moved" (the rule: `campaign.verdict.drift.repeated`).  The verdict copes with
both on its own (the stall screen; interleaved rounds cancel a move): the note is for
the reader, never an input to a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

from campaign.loop.experiment import launch_tables
from campaign.ports.store import LoopStore
from campaign.verdict.drift import launch_drift, repeated
from campaign.verdict.noise import NodeNoise

__all__ = ["check_drift"]


def check_drift(
    store: LoopStore,
    campaign_id: str,
    baseline_id: str | None,
    experiment: str,
    repeat: int,
    metric: str,
    noise: NodeNoise | None,
    confidence: float = 0.99,
    work: Mapping[str, str] | None = None,
) -> str | None:
    """This launch of the baseline config (an interleaved baseline side) against the
    campaign's baseline measurement (`launch_drift`: one test per workload on the
    launch's mean over its levels, sized by the node's noise model, Bonferroni over
    workloads at `confidence`).  A move is recorded as a drift event (the journal lists
    it) and as an artifact; None when the launch sits where the node's launches do.
    `work`: compare only launches of that work per workload (a launch that did other work
    than the campaign baseline says nothing about the node: `campaign.loop.work_check`)."""
    if not baseline_id or noise is None:
        return None
    ref = launch_tables(store, baseline_id, metric, work=work)
    rows = launch_tables(store, experiment, metric, work=work)
    moved = launch_drift(
        ref, {w: [t[repeat]] for w, t in rows.items() if len(t) > repeat}, noise, confidence=confidence
    )
    if not moved:
        return None
    before = launch_drift(
        ref,
        {w: [t[repeat - 1]] for w, t in rows.items() if repeat > 0 and len(t) > repeat},
        noise,
        confidence=confidence,
    )
    shifts = ", ".join(f"{w} {pct:+.1f}%" for w, pct in moved)
    if both := repeated(moved, before):
        msg = (
            f"the node moved during {experiment}: its baseline launches of rounds {repeat} and {repeat + 1} "
            f"are both off on {', '.join(both)} ({shifts} now) vs {baseline_id} ({noise.describe()}); "
            f"the interleaved A/B comparison cancels it"
        )
    else:
        msg = (
            f"a baseline launch off its level during {experiment} round {repeat + 1}: {shifts} vs {baseline_id} "
            f"({noise.describe()}); one launch: a stall, or the node moved (the stall screen drops a stalled "
            f"launch; the next baseline launches tell which)"
        )
    store.add_event(campaign_id, "drift", msg, key=f"drift:{experiment}:{repeat}")
    store.record_artifact(experiment, "drift", msg, seq=repeat)
    return msg
