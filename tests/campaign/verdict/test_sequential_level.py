"""The adaptive policy's per-look levels (`multiplicity.spending_levels`), checked against
numbers from outside this code: Pocock's published constants (for the numerical
integration) and simulated Brownian motions looked at after the playbook's rounds (for
the error each look spends)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from campaign.playbook.schema import VerdictSpec
from campaign.verdict.multiplicity import SPENDING_GAMMA, crossed, hsd_spent, look_alpha, spending_levels

# Pocock's C_P(K, alpha=0.05), two-sided, K equally spaced looks (Jennison & Turnbull,
# "Group Sequential Methods", Table 2.1)
POCOCK_CP = {1: 1.960, 2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413, 6: 2.453, 7: 2.485, 8: 2.512}


@pytest.mark.parametrize("k", sorted(POCOCK_CP))
def test_the_integration_gives_pococks_published_constants_their_level(k: int) -> None:
    looks = tuple(range(1, k + 1))
    assert crossed(looks, (POCOCK_CP[k],) * k) == pytest.approx(0.05, abs=0.0004)  # C_P rounded to 0.001


def _crossed_by_look(looks: tuple[int, ...], levels: tuple[float, ...], paths: int = 400_000) -> np.ndarray:
    """Share of null Brownian paths whose z-statistic has crossed its look's level by each look."""
    rng = np.random.default_rng(20261206)
    t = np.asarray(looks, dtype=float)
    steps = np.diff(np.concatenate([[0.0], t]))
    s = np.cumsum(rng.standard_normal((paths, len(t))) * np.sqrt(steps), axis=1)
    z = stats.norm.isf(np.asarray(levels) / 2)
    return np.asarray(np.maximum.accumulate(np.abs(s / np.sqrt(t)) >= z, axis=1).mean(axis=0))


@pytest.mark.parametrize("lo, hi", [(2, 6), (3, 5), (2, 10)])
@pytest.mark.parametrize("gamma", [SPENDING_GAMMA, 1.0, -4.0])
def test_each_look_spends_what_the_spending_function_allows(lo: int, hi: int, gamma: float) -> None:
    """By look k the null paths have crossed with probability alpha(t_k), and by the last
    look exactly alpha: the looks after rounds lo..hi correlate more than looks spread from
    0, which a table for as many evenly spread looks would not account for."""
    looks = tuple(range(lo, hi + 1))
    levels = spending_levels(looks, 0.05, gamma)
    got = _crossed_by_look(looks, levels)
    want = [hsd_spent(k / hi, 0.05, gamma) for k in looks]
    assert got == pytest.approx(want, abs=0.0015)  # 400,000 paths: one standard error <= 0.00034
    assert got[-1] == pytest.approx(0.05, abs=0.0015)


def test_the_shipped_shape_spends_less_at_the_first_look_than_at_the_last() -> None:
    spec = VerdictSpec(repeats={"min": 2, "max": 6}, policy="adaptive", confidence=0.95)
    first, last = look_alpha(spec, 2), look_alpha(spec, 6)
    assert first < 0.0178 < last  # Pocock's equal level for these looks lies between
    assert look_alpha(spec, 1) == first and look_alpha(spec, 9) == last  # clamped to the looks


def test_one_look_spends_the_whole_level() -> None:
    assert look_alpha(VerdictSpec(repeats={"min": 3, "max": 3}, policy="adaptive"), 3) == pytest.approx(0.05)
    assert look_alpha(VerdictSpec(repeats={"min": 2, "max": 6}, policy="fixed"), 2) == pytest.approx(0.05)
    assert look_alpha(VerdictSpec(repeats={"min": 2, "max": 6}, confidence=0.9), 4) == pytest.approx(
        spending_levels((2, 3, 4, 5, 6), 0.1, SPENDING_GAMMA)[2]
    )
