"""Correctness gate, the judging half: greedy outputs of a candidate against the baseline's.

A flag that makes a server faster by computing something else is not an improvement;
greedy (temperature 0) completions of the same prompts must match.
"""

from __future__ import annotations

from campaign.domain.records import CorrectnessResult

__all__ = ["MAX_EXAMPLES", "compare_outputs"]

MAX_EXAMPLES = 3


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_outputs(baseline: list[str], candidate: list[str], tolerance: float) -> CorrectnessResult:
    """Passed when the fraction of prompts whose outputs differ is <= ``tolerance``."""
    if len(baseline) != len(candidate):
        raise ValueError(f"compare_outputs: {len(baseline)} baseline outputs vs {len(candidate)} candidate outputs")
    examples: list[str] = []
    mismatches = 0
    for index, (a, b) in enumerate(zip(baseline, candidate)):
        if a == b:
            continue
        mismatches += 1
        if len(examples) < MAX_EXAMPLES:
            at = _first_difference(a, b)
            examples.append(f"prompt {index}: differs at char {at}: {a[at : at + 40]!r} vs {b[at : at + 40]!r}")
    prompts = len(baseline)
    return CorrectnessResult(
        prompts=prompts,
        mismatches=mismatches,
        tolerance=tolerance,
        passed=(mismatches / prompts if prompts else 0.0) <= tolerance,
        examples=examples,
    )
