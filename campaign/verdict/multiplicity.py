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
  repeats.max, so the looks share the family's level by an error-spending function
  (Lan-DeMets boundaries, `spending_levels`, shaped by `SPENDING_GAMMA`); the no-loss
  half of a WIN is re-tested at the same looks and spends its one-sided level the same
  way (`one_sided_confidence`).
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

__all__ = [
    "SPENDING_GAMMA",
    "Unit",
    "boundaries",
    "crossed",
    "effective_tests",
    "holm",
    "hsd_spent",
    "look_alpha",
    "one_sided_confidence",
    "p_decisive",
    "spending_levels",
]

#: grid points per standard deviation in `boundaries`' numerical integration.
_GRID_PER_SD = 400


#: the shape of the adaptive policy's error spending: Hwang, Shih and DeCani's family,
#: alpha(t) = alpha (1 - e^(-gamma t)) / (1 - e^(-gamma)) at information t = rounds / max.
#: gamma = -2 spends less at the first looks and more at the last than Pocock's equal
#: levels (0.0074, 0.0088, 0.0138, 0.0217, 0.0338 at rounds 2..6 where Pocock gives 0.0178
#: at each): a verdict after two launches a side rests on the fewest df, and that is where
#: the lab's rare wrong verdicts were; an effect still open at round 6 is tested nearer a
#: fixed design's 0.05.  Chosen in the verdict lab (`bench/verdict_lab.py`) with the projection's move at
#: one standard error (`judge.PROJECTION_SHIFT_SE`): against Pocock with 1.28, fewer
#: misses and wrong verdicts in as many rounds (gamma = -1: fewer rounds, more misses).
SPENDING_GAMMA = -2.0


def look_alpha(spec: VerdictSpec, look: int) -> float:
    """The two-sided level a test at this look may use: the adaptive policy looks after
    every round from repeats.min to repeats.max and stops at the first decisive one, so
    the looks share the family's alpha as `spending_levels` spends it (`look` is clamped
    to those rounds; a projection to repeats.max uses the last look's level); the fixed
    policy looks once."""
    return _spent_level(spec, look, 1.0 - spec.confidence)


def one_sided_confidence(spec: VerdictSpec, look: int | None = None) -> float:
    """The two-sided confidence whose interval's lower end is the no-loss test's
    one-sided bound (the intersection-union half of a WIN) at this look.  One look
    (`look` None, or the fixed policy): the one-sided bound at `spec.confidence`.  The
    adaptive policy re-tests the no-loss half at every look it could stop at, so that
    test spends its error across the looks as the win tests do: one-sided boundaries
    at alpha are the two-sided ones of the same spending at 2 alpha."""
    alpha = 1.0 - spec.confidence
    level = 2.0 * alpha if look is None else _spent_level(spec, look, 2.0 * alpha)
    return max(0.5, 1.0 - level)


def _spent_level(spec: VerdictSpec, look: int, alpha: float) -> float:
    """This look's nominal two-sided level when the looks share `alpha` (`look_alpha`)."""
    if spec.policy == "fixed" or spec.repeats.max <= spec.repeats.min:
        return alpha
    looks = tuple(range(max(1, spec.repeats.min), spec.repeats.max + 1))
    return spending_levels(looks, alpha, SPENDING_GAMMA)[looks.index(min(max(look, looks[0]), looks[-1]))]


def hsd_spent(t: float, alpha: float, gamma: float) -> float:
    """Hwang-Shih-DeCani (1990): the error spent by information t (0..1)."""
    if gamma == 0:
        return alpha * t
    return alpha * (1.0 - math.exp(-gamma * t)) / (1.0 - math.exp(-gamma))


@lru_cache(maxsize=64)
def spending_levels(looks: tuple[int, ...], alpha: float, gamma: float) -> tuple[float, ...]:
    """Each look's nominal two-sided level under `hsd_spent` (information proportional
    to rounds: t = look / the last look)."""
    spent = tuple(hsd_spent(k / looks[-1], alpha, gamma) for k in looks)
    return tuple(float(2.0 * _scipy_stats.norm.sf(z)) for z in boundaries(looks, spent))


@lru_cache(maxsize=64)
def boundaries(looks: tuple[int, ...], spent: tuple[float, ...]) -> tuple[float, ...]:
    """Lan and DeMets (1983): the two-sided z boundary of each look such that a null
    Brownian motion S, looked at as Z_k = S(t_k) / sqrt(t_k), has crossed one by look k
    with probability spent[k] (cumulative).  Each boundary in turn, by the recursive
    numerical integration of Armitage, McPherson and Rowe (1969) (`crossed`)."""
    zs: list[float] = []
    for i, target in enumerate(spent):
        if i == 0:
            zs.append(float(_scipy_stats.norm.isf(target / 2)))
            continue

        def cross(z: float, i: int = i, target: float = target) -> float:
            return crossed(looks[: i + 1], (*zs, z)) - target

        zs.append(float(_scipy_optimize.brentq(cross, 0.1, 8.0, xtol=1e-7)))
    return tuple(zs)


def crossed(looks: tuple[int, ...], zs: tuple[float, ...]) -> float:
    """P(|S(t_k)| >= z_k sqrt(t_k) at some look) for a standard Brownian motion S: the
    density of the paths still inside, on a lattice of step 1/`_GRID_PER_SD`, carried
    from look to look by a convolution with the increment's normal density and cut at
    the next boundary."""
    h = 1.0 / _GRID_PER_SD

    def half_width(t: int, z: float) -> int:
        return int(z * math.sqrt(t) / h)

    n_old = half_width(looks[0], zs[0])
    dens = _scipy_stats.norm.pdf(_np.arange(-n_old, n_old + 1) * h, scale=math.sqrt(looks[0]))
    for prev, t, z in zip(looks, looks[1:], zs[1:]):
        n_new = half_width(t, z)
        reach = n_old + n_new  # lattice steps from the old grid's edge to the new one's
        kernel = _scipy_stats.norm.pdf(_np.arange(-reach, reach + 1) * h, scale=math.sqrt(t - prev)) * h
        full = _scipy_signal.fftconvolve(dens, kernel)  # lattice indices -(n_old + reach) .. +(n_old + reach)
        centre = n_old + reach
        dens, n_old = full[centre - n_new : centre + n_new + 1], n_new
    return 1.0 - float(dens.sum() * h)


def effective_tests(offset: float, level_vars: Sequence[float]) -> float:
    """Cheverud-Nyholt: levels that share a launch offset are correlated tests,
    M_eff = 1 + (L - 1)(1 - mean pairwise correlation^2)."""
    width = len(level_vars)
    if width < 2:
        return 1.0
    cors = [
        offset / math.sqrt(level_vars[i] * level_vars[j])
        for i in range(width)
        for j in range(i + 1, width)
        if level_vars[i] > 0 and level_vars[j] > 0
    ]
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
    corr = [
        [
            1.0 if i == j else (max(-1.0, min(1.0, cov[i][j] / (sd[i] * sd[j]))) if sd[i] > 0 and sd[j] > 0 else 0.0)
            for j in range(size)
        ]
        for i in range(size)
    ]
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


def holm(units: dict[tuple[str, int | None], Unit], alpha: float, m: float, step_down: bool = True) -> None:
    """Holm's step-down over the units (Holm 1979), on the effective count: in order of
    p, a unit is decided when p <= alpha / (the weight of the units not yet decided);
    the first that is not stops the procedure, and it and the rest are drawn at that
    step's level.  The first step is the Bonferroni level over the effective number of
    tests; every decided unit frees its share, so one clear loss across a sweep does not
    make a smaller single-stream win pay for eight tests.  Sets each unit's `conf`.
    `step_down` False: Bonferroni, every unit at the first step's level."""
    order = sorted(units.values(), key=lambda u: p_decisive(u, m))
    left = math.fsum(u.weight for u in order)
    for i, u in enumerate(order):
        level = alpha / max(left, 1.0)
        if step_down and p_decisive(u, m) <= level:
            u.conf = 1.0 - level
            left -= u.weight
            continue
        for rest in order[i:]:
            rest.conf = 1.0 - level
        return
