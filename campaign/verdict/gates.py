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


def continue_rounds(samples: Sequence[LevelSamples], spec: VerdictSpec, rounds_done: int, *, confounded: bool,
                    noise_floor_pct: float | None = None, noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
                    noise_by_workload: Mapping[str, tuple[float, int]] | None = None) -> bool:
    """Another interleaved round?  The sequential rule (`needs_more_repeats`) within
    `repeats.max`; a confounded run stops at `repeats.min`, since no number of repeats
    turns a run with an undeclared setting into a result."""
    if confounded:
        return rounds_done < spec.repeats.min
    more = needs_more_repeats(samples, spec, rounds_done, noise_floor_pct=noise_floor_pct,
                              noise_floor_df=noise_floor_df, noise_by_workload=noise_by_workload)
    return more and rounds_done < spec.repeats.max


def same_work(v: Verdict, mismatched_workloads: Sequence[str]) -> Verdict:
    """A WIN measured on different prompt sets on the two sides is not a result: the
    speed-up may be the prompts'.  It becomes INCONCLUSIVE with that reason."""
    if v.kind != "win" or not mismatched_workloads:
        return v
    return v.model_copy(update={"kind": "inconclusive",
                                "reason": "not the same work: the sides ran different prompt sets "
                                          f"({', '.join(mismatched_workloads)})"})
