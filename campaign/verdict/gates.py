"""The verdict rules that sit around `decide()`: when to stop measuring, and when a
decisive verdict does not stand because the two sides did not do the same work.

They live here, not in the graph's nodes, so "where do I change the verdict rule"
has one answer: `campaign/verdict/`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from campaign.domain.records import LevelSamples, Verdict
from campaign.playbook.schema import VerdictSpec
from campaign.verdict.rule import needs_more_repeats
from campaign.verdict.stats import DEFAULT_NOISE_FLOOR_DF

__all__ = ["continue_rounds", "same_work"]


def continue_rounds(
    samples: Sequence[LevelSamples],
    spec: VerdictSpec,
    rounds_done: int,
    *,
    confounded: bool,
    noise_floor_pct: float | None = None,
    noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
    noise_by_workload: Mapping[str, tuple[float, int]] | None = None,
) -> bool:
    """Another interleaved round?  The sequential rule (`needs_more_repeats`) within
    `repeats.max`; a confounded run stops at `repeats.min`, since no number of repeats
    turns a run with an undeclared setting into a result."""
    if confounded:
        return rounds_done < spec.repeats.min
    more = needs_more_repeats(
        samples,
        spec,
        rounds_done,
        noise_floor_pct=noise_floor_pct,
        noise_floor_df=noise_floor_df,
        noise_by_workload=noise_by_workload,
    )
    return more and rounds_done < spec.repeats.max


def same_work(v: Verdict, mixed_workloads: Sequence[str]) -> Verdict:
    """A speed verdict (a WIN, or a DEAD END for speed) from launches that did not all do
    the same work (`campaign.domain.work`: other prompts, another order, other request
    counts or output length) is not a result: the difference may be the work's.  It
    becomes INCONCLUSIVE with that reason.  A failed correctness check stands: the
    greedy outputs do not depend on the load."""
    if not mixed_workloads or v.kind not in ("win", "dead_end") or v.failure_class is not None:
        return v
    if v.kind == "dead_end" and v.correctness is not None and not v.correctness.passed:
        return v
    return v.model_copy(
        update={
            "kind": "inconclusive",
            "revisit_on": [],
            "reason": "not the same work: the launches compared did not all do the same work "
            f"({', '.join(mixed_workloads)}: prompts, their order, request counts, "
            "output tokens or endpoint changed between launches)",
        }
    )
