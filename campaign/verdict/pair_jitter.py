"""Each level's jitter from the differences between levels of one launch (Grubbs'
estimator), so a quiet level is not measured through a noisy one.

Why: a launch's levels share its offset, x_l = mu_l + o + e_l, so the difference of two
levels of one launch has no offset at all: var(x_a - x_b) = s_a^2 + s_b^2 (independent
jitters).  Each pair's variance is read straight off the launches' cross products (each
table's own level means removed); the L jitters are then the weighted least-squares fit
of the L(L-1)/2 pair variances, weighted by 1 / (s_a^2 + s_b^2)^2 (a variance estimate's
own variance grows with its square), re-weighted a few times.

The moment estimator it replaces (`components.level_jitter`) reads each level's residual
from the launch mean, which carries every level's jitter: one request at C=1 jitters
16x as much as 250 requests at C=250, so C=250's residual was mostly C=1's, and its
estimate came out about 5x its truth (1.2% against 0.25%, 200 launches of a generator
with known jitters).  Here the pairs of quiet levels measure them directly
(0.19% against 0.25% on the same launches).  From fewer than `MIN_DF` launches per
level the pairs are too few to stand alone and the moment estimator, shrunk toward the
workload's mean, is used instead (`WorkloadNoise.jitter`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_DF", "cross_products", "pair_jitter"]

MIN_DF = 10  # launches - 1, summed over tables, before the pair estimate is used
_REWEIGHT = 5  # weighted least-squares passes
_FLOOR = 0.01  # of the mean jitter: no level looks noise-free


def cross_products(table: Sequence[Sequence[float]]) -> list[list[float]]:
    """The L x L sums of cross products of one R x L table about its level means (R - 1 df)."""
    r, width = len(table), len(table[0])
    means = [math.fsum(row[j] for row in table) / r for j in range(width)]
    dev = [[row[j] - means[j] for j in range(width)] for row in table]
    return [[math.fsum(d[a] * d[b] for d in dev) for b in range(width)] for a in range(width)]


def pair_jitter(cross: Sequence[Sequence[float]], df: int) -> list[float]:
    """Each level's jitter variance from summed cross products `cross` with `df` degrees
    of freedom (see the module doc); L > 2 levels."""
    c = np.asarray(cross, dtype=float) / df
    width = c.shape[0]
    a, b = np.triu_indices(width, k=1)
    pair_var = c[a, a] + c[b, b] - 2 * c[a, b]  # var(x_a - x_b): the launch offset cancels
    design = np.zeros((a.size, width))
    design[np.arange(a.size), a] = 1.0
    design[np.arange(a.size), b] = 1.0
    s2 = np.full(width, max(float(pair_var.mean()) / 2, 1e-12))
    for _ in range(_REWEIGHT):
        root_w = 1.0 / np.maximum(design @ s2, 1e-12)  # sqrt of 1 / (s_a^2 + s_b^2)^2
        s2 = np.linalg.lstsq(design * root_w[:, None], pair_var * root_w, rcond=None)[0]
        s2 = np.maximum(s2, _FLOOR * max(float(np.maximum(s2, 0.0).mean()), 1e-12))
    return [float(v) for v in s2]
