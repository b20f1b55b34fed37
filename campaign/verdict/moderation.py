"""How much the node's pooled noise is worth to one experiment: the prior df of an
empirical-Bayes (moderated) variance, as limma's moderated t estimates it (Smyth 2004).

Where the node's noise is the same in every experiment the pooled estimate keeps all its
df (or nearly: a large prior df); where it moves with the machine's load, the prior
counts for fewer df and each experiment's own spread for more.
`campaign.verdict.noise` attaches the figure to the node's noise model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from scipy import special as _scipy_special

__all__ = ["MIN_HETEROGENEITY_DF", "prior_df"]

#: mean squares with fewer df are left out of the heterogeneity estimate when others exist.
MIN_HETEROGENEITY_DF = 4


class _SumOfSquares(Protocol):
    @property
    def ss(self) -> float: ...

    @property
    def df(self) -> int: ...


def prior_df(groups: Sequence[Sequence[_SumOfSquares]]) -> float | None:
    """How many df the node's pooled noise is worth for one experiment: the prior df d0 of
    an empirical-Bayes (moderated) variance, estimated from how much the tables' mean
    squares vary beyond what their own df explain (Smyth 2004, the moderated t of limma):
    log ms_g minus its expectation under a common variance, centred per group (`groups`:
    components that share one expected mean square, e.g. one workload's launch rows); the
    excess of its variance over trigamma(d_g / 2) is trigamma(d0 / 2).  A node whose
    noise is the same in every experiment gives no excess: None (the prior keeps all its
    df).  A node whose noise moves with the load of the machine gives a small d0, and
    each experiment's own spread counts for more."""
    usable = [
        g for g in ([(c.ss / c.df, c.df) for c in group if c.df > 0 and c.ss > 0] for group in groups) if len(g) >= 2
    ]
    # the log of a mean square with 1-3 df is mostly its own noise (variance 4.9 at 1 df):
    # where better-founded ones exist (residuals, tables of 5+ launches), they alone speak
    solid = [g for g in ([x for x in group if x[1] >= MIN_HETEROGENEITY_DF] for group in usable) if len(g) >= 2]
    usable = solid or usable
    if not usable:
        return None
    excess, n = 0.0, 0
    for g in usable:
        z = [math.log(ms) - float(_scipy_special.digamma(d / 2)) + math.log(d / 2) for ms, d in g]
        zbar = math.fsum(z) / len(z)
        k = len(z) / (len(z) - 1)
        excess += math.fsum(k * (x - zbar) ** 2 - float(_scipy_special.polygamma(1, d / 2)) for x, (_, d) in zip(z, g))
        n += len(z)
    if n < 4 or excess <= 0:
        return None
    return _trigamma_inverse(excess / n) * 2.0


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Newton's method on 1/trigamma, as limma does)."""
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(_scipy_special.polygamma(1, x))
        dif = tri * (1.0 - tri / y) / float(_scipy_special.polygamma(2, x))
        x += dif
        if -dif / x < 1e-8:
            break
    return x
