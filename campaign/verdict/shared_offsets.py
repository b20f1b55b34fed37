"""How much of one launch's speed offset the workloads it serves share: the correlation
of their launch offsets, from the node's history.

Why: a launch of a server runs every workload (the single stream, then the sweep), and
whatever makes that launch fast or slow (the clocks it got, where its memory landed)
moves them together.  Their common effects in one experiment are then correlated tests,
and counting them as independent ones makes the first Holm step ask each for a
Bonferroni level it does not need (`campaign.verdict.multiplicity`).  Nothing assumes
they share it: a node whose workloads move independently shows r near 0, and the count
stays what it was.

Per pair of workloads (a, b), over every table of the history where both kept the same
launches (no launch screened out of either): the cross products of their launch means
about each table's own means, SP, and their sums of squares SS_a, SS_b, with the df
sum(R - 1).  The launch means' correlation SP / sqrt(SS_a SS_b) is taken at its one-sided
95% lower bound (Fisher's z, `df - 2`; nothing below 5 df): a few launches show little,
and a correlation overstated would shrink the count for nothing.  Its jitter does not
correlate, so that bound times sqrt(SS_a SS_b) / df bounds the offsets' covariance; over
the offsets' own variances (the node's launch variance less its jitter's share) it is
the offsets' correlation, capped at 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["MIN_DF", "shared_offsets"]

#: df the launch means of a pair need before their correlation counts.
MIN_DF = 5
_Z95 = 1.6448536269514722


def shared_offsets(
    means: Sequence[Mapping[str, Sequence[float]]], offsets: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """`means`: per table group, each workload's launch means (log scale) in launch
    order, only where its table kept every launch of the group; `offsets`: each
    workload's offset variance on this node.  Returns workload -> workload -> the
    offsets' conservative correlation (module doc), for the pairs above 0."""
    names = sorted({name for group in means for name in group})
    out: dict[str, dict[str, float]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            sp = ssa = ssb = 0.0
            df = 0
            for group in means:
                xa, xb = group.get(a), group.get(b)
                if xa is None or xb is None or len(xa) != len(xb) or len(xa) < 2:
                    continue
                ma, mb = math.fsum(xa) / len(xa), math.fsum(xb) / len(xb)
                sp += math.fsum((p - ma) * (q - mb) for p, q in zip(xa, xb))
                ssa += math.fsum((p - ma) ** 2 for p in xa)
                ssb += math.fsum((q - mb) ** 2 for q in xb)
                df += len(xa) - 1
            oa, ob = offsets.get(a, 0.0), offsets.get(b, 0.0)
            if df < MIN_DF or ssa <= 0 or ssb <= 0 or oa <= 0 or ob <= 0:
                continue
            r = max(-0.999999, min(0.999999, sp / math.sqrt(ssa * ssb)))
            low = math.tanh(math.atanh(r) - _Z95 / math.sqrt(df - 2))
            if low <= 0:
                continue
            corr = min(1.0, low * math.sqrt(ssa * ssb) / df / math.sqrt(oa * ob))
            out.setdefault(a, {})[b] = corr
            out.setdefault(b, {})[a] = corr
    return out
