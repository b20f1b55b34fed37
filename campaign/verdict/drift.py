"""Drift on the node's noise model: did this launch of the baseline config land where
the node's launches land, or did the node move?

One test per workload on the launch's mean over its levels against the reference
measurement's grand mean (log scale).  A launch mean varies by A / L (the rows mean
square of the noise model: offset plus the levels' averaged jitter), the reference's
grand mean by A / (L R_ref); t with the model's df, Bonferroni over the workloads.
A move must also exceed one launch's own spread, so a significant but tiny shift on a
very quiet node is not news.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from campaign.verdict.components import log_table
from campaign.verdict.noise import NodeNoise, WorkloadNoise
from campaign.verdict.stats import quantile

__all__ = ["launch_drift", "mean_shift", "repeated"]


def launch_drift(
    reference: Mapping[str, Sequence[Sequence[float]]],
    launch: Mapping[str, Sequence[Sequence[float]]],
    noise: NodeNoise,
    *,
    confidence: float = 0.99,
) -> list[tuple[str, float]]:
    """[(workload, shift %)] for the workloads where `launch` (one row per workload)
    moved beyond the noise from `reference` (R_ref rows per workload); raw figures."""
    tests = [w for w in launch if w in reference and noise.get(w) is not None]
    moved = []
    for w in tests:
        ref, now = log_table(reference[w]), log_table(launch[w][:1])
        wn = noise.get(w)
        if ref is None or now is None or wn is None or len(ref[0]) != len(now[0]) or wn.levels != len(now[0]):
            continue
        width = len(now[0])
        a = wn.rows.ms or 0.0
        shift, se = mean_shift(now, math.fsum(math.fsum(r) for r in ref) / (len(ref) * width), len(ref), wn)
        if se <= 0:
            continue
        t = quantile(1.0 - (1.0 - confidence) / len(tests), wn.rows.df)
        if abs(shift) > t * se and abs(shift) > math.sqrt(a / width):
            moved.append((w, math.expm1(shift) * 100.0))
    return moved


def mean_shift(
    now: Sequence[Sequence[float]], ref_mean: float, ref_launches: int, wn: WorkloadNoise
) -> tuple[float, float]:
    """(shift, se) on the log scale: the mean of `now`'s launch means (log rows, one per
    launch) against a reference level that `ref_launches` launches measured.  A launch
    mean varies by A / L, the noise model's rows mean square over the levels."""
    width = len(now[0])
    shift = math.fsum(math.fsum(row) / width for row in now) / len(now) - ref_mean
    return shift, math.sqrt((wn.rows.ms or 0.0) / width * (1.0 / len(now) + 1.0 / ref_launches))


def repeated(now: Sequence[tuple[str, float]], before: Sequence[tuple[str, float]]) -> list[str]:
    """The workloads where two consecutive launches (`launch_drift` of each) moved the
    same way: the node moved.  One launch off is a stall as much as a move."""
    prev = dict(before)
    return [w for w, pct in now if w in prev and (prev[w] > 0) == (pct > 0)]
