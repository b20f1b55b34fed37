"""Multiplicity of the verdict's tests: how many chances to declare a winner one
experiment takes, and the level each test is drawn at.

* Levels of one workload share each launch's speed offset, so they are correlated
  tests: `effective_tests` counts them as Cheverud and Nyholt do, M_eff = 1 + (L - 1)
  (1 - mean pairwise correlation^2), not as L independent ones.
* Workloads of one launch share its offset too (the single stream and the sweep run in
  the same server), so the homogeneous workloads' common effects are correlated tests:
  `shared_launch_factor` shrinks their weights by the ratio of Cheverud-Nyholt's count
  with and without that correlation (the node's, `campaign.verdict.shared_offsets`; 0
  where none is shown, and the count stays as it was).
* `holm`: Holm's weighted step-down over the tests that can declare a winner (one per
  homogeneous workload; elsewhere each level with weight M_eff / L): the first at the
  Bonferroni level over all of them, each decided test freeing its share for the rest.
* `look_alpha`: the adaptive policy looks after every round from repeats.min to
  repeats.max, so each look spends Pocock's nominal level, computed for those looks
  (`pocock_level`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as _np
from scipy import optimize as _scipy_optimize
from scipy import signal as _scipy_signal
from scipy import stats as _scipy_stats

from campaign.playbook.schema import VerdictSpec

__all__ = ["Unit", "effective_tests", "holm", "look_alpha", "p_decisive", "pocock_level"]

#: grid points per standard deviation in `pocock_level`'s numerical integration.
_GRID_PER_SD = 400


def look_alpha(spec: VerdictSpec) -> float:
    """The family error rate each look may spend: the adaptive policy looks after every
    round from repeats.min to repeats.max and stops at the first decisive one, so each
    look uses Pocock's nominal level for those looks (`pocock_level`); the fixed policy
    looks once."""
    alpha = 1.0 - spec.confidence
    if spec.policy == "fixed" or spec.repeats.max <= spec.repeats.min:
        return alpha
    return pocock_level(tuple(range(max(1, spec.repeats.min), spec.repeats.max + 1)), alpha)


@lru_cache(maxsize=64)
def pocock_level(looks: tuple[int, ...], alpha: float) -> float:
    """The nominal two-sided level c_alpha of Pocock's boundary (the same level at every
    look) that spends exactly `alpha` over looks after `looks` rounds (information
    proportional to rounds): P(|Z_k| >= z for some k) = alpha for the z-statistics
    Z_k = S(t_k) / sqrt(t_k) of a Brownian motion S, by the recursive numerical
    integration of Armitage, McPherson and Rowe (1969).  Pocock's published constants
    are for K looks equally spaced from 0 (1/K, 2/K, ..1); this policy looks first after
    repeats.min rounds, so its looks are closer together (2..6 of 6: t = 1/3..1) and
    correlate more: 0.0178 per look where Pocock's table for 5 looks gives 0.0158."""
    if len(looks) <= 1:
        return alpha

    def cross(z: float) -> float:
        return 1.0 - _stay_inside(looks, z) - alpha

    z = float(_scipy_optimize.brentq(cross, _scipy_stats.norm.isf(alpha / 2), 6.0, xtol=1e-7))
    return float(2.0 * _scipy_stats.norm.sf(z))


def _stay_inside(looks: tuple[int, ...], z: float) -> float:
    """P(|S(t_k)| < z sqrt(t_k) at every look) for a standard Brownian motion S: the
    density on a lattice of step 1/`_GRID_PER_SD`, carried from look to look by a
    convolution with the increment's normal density and cut at the next boundary."""
    h = 1.0 / _GRID_PER_SD

    def inside(t: int) -> _np.ndarray:
        n = int(z * math.sqrt(t) / h)
        return _np.arange(-n, n + 1) * h

    grid = inside(looks[0])
    dens = _scipy_stats.norm.pdf(grid, scale=math.sqrt(looks[0]))
    for prev, t in zip(looks, looks[1:]):
        nxt = inside(t)
        reach = (len(nxt) - len(grid)) // 2 + len(grid) - 1  # lattice steps from the old grid to the new
        kernel = _scipy_stats.norm.pdf(_np.arange(-reach, reach + 1) * h, scale=math.sqrt(t - prev)) * h
        full = _scipy_signal.fftconvolve(dens, kernel)  # lattice indices -(old n + reach) .. +(old n + reach)
        cut = (len(full) - len(nxt)) // 2
        dens, grid = full[cut:cut + len(nxt)], nxt
    return float(dens.sum() * h)


def effective_tests(offset: float, level_vars: Sequence[float]) -> float:
    """Cheverud-Nyholt: levels that share a launch offset are correlated tests,
    M_eff = 1 + (L - 1)(1 - mean pairwise correlation^2)."""
    width = len(level_vars)
    if width < 2:
        return 1.0
    cors = [offset / math.sqrt(level_vars[i] * level_vars[j]) for i in range(width) for j in range(i + 1, width)
            if level_vars[i] > 0 and level_vars[j] > 0]
    rho = min(1.0, math.fsum(cors) / len(cors)) if cors else 0.0
    return 1.0 + (width - 1) * (1.0 - rho * rho)


def cheverud_nyholt(corr: Sequence[Sequence[float]]) -> float:
    """Nyholt's (2004) form of Cheverud's effective number of tests from a correlation
    matrix's eigenvalues: M_eff = 1 + (M - 1)(1 - Var(lambda) / M)."""
    size = len(corr)
    if size < 2:
        return float(size)
    eig = _np.linalg.eigvalsh(_np.asarray(corr, dtype=float))
    return float(min(size, max(1.0, 1.0 + (size - 1) * (1.0 - float(_np.var(eig, ddof=1)) / size))))


def shared_launch_factor(cov: Sequence[Sequence[float]]) -> float:
    """How much correlation between tests (workloads measured in the same launches)
    shrinks their count: M_eff of their correlation matrix over the M_eff of as many
    independent tests (<= 1)."""
    size = len(cov)
    if size < 2:
        return 1.0
    sd = [math.sqrt(cov[i][i]) if cov[i][i] > 0 else 0.0 for i in range(size)]
    corr = [[1.0 if i == j else (max(-1.0, min(1.0, cov[i][j] / (sd[i] * sd[j]))) if sd[i] > 0 and sd[j] > 0 else 0.0)
             for j in range(size)] for i in range(size)]
    return min(1.0, cheverud_nyholt(corr) / size)


@dataclass
class Unit:
    """One test that can declare a winner: a homogeneous workload's common effect, or
    one level of a workload whose levels differ (log scale).  `weight`: its share of the
    multiplicity count (1; a level of a workload whose L levels share launch offsets
    counts M_eff / L, so its L levels count M_eff together); `conf`: the confidence its
    interval is drawn at (`holm`)."""

    centre: float
    se: float
    df: float
    weight: float
    conf: float = 0.95


def p_decisive(u: Unit, m: float) -> float:
    """Two-sided p-value of "the effect lies beyond the band": the interval at 1 - p
    just touches +m (or -m).  1 inside the band."""
    if u.se <= 0:
        return 0.0 if abs(u.centre) > math.log1p(m / 100.0) else 1.0
    if u.centre > 0:
        stat = (u.centre - math.log1p(m / 100.0)) / u.se
    else:
        stat = (math.log1p(-m / 100.0) - u.centre) / u.se
    if stat <= 0:
        return 1.0
    return float(2.0 * _scipy_stats.t.sf(stat, min(u.df, 1e6)))


def holm(units: dict[tuple[str, int | None], Unit], alpha: float, m: float) -> None:
    """Holm's step-down over the units (Holm 1979), on the effective count: in order of
    p, a unit is decided when p <= alpha / (the weight of the units not yet decided);
    the first that is not stops the procedure, and it and the rest are drawn at that
    step's level.  The first step is the Bonferroni level over the effective number of
    tests; every decided unit frees its share, so one clear loss across a sweep does not
    make a smaller single-stream win pay for eight tests.  Sets each unit's `conf`."""
    order = sorted(units.values(), key=lambda u: p_decisive(u, m))
    left = math.fsum(u.weight for u in order)
    for i, u in enumerate(order):
        level = alpha / max(left, 1.0)
        if p_decisive(u, m) <= level:
            u.conf = 1.0 - level
            left -= u.weight
            continue
        for rest in order[i:]:
            rest.conf = 1.0 - level
        return
