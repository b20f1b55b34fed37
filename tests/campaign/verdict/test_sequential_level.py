"""The adaptive policy's per-look level (`multiplicity.pocock_level`), checked against
numbers from outside this code: Pocock's published constants and a simulated Brownian
motion looked at after the playbook's rounds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from campaign.playbook.schema import VerdictSpec
from campaign.verdict.multiplicity import look_alpha, pocock_level

# Pocock's C_P(K, alpha=0.05), two-sided, K equally spaced looks (Jennison & Turnbull,
# "Group Sequential Methods", Table 2.1)
POCOCK_CP = {1: 1.960, 2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413, 6: 2.453, 7: 2.485, 8: 2.512}


@pytest.mark.parametrize("k", sorted(POCOCK_CP))
def test_equally_spaced_looks_give_pococks_published_constant(k: int) -> None:
    z = stats.norm.isf(pocock_level(tuple(range(1, k + 1)), 0.05) / 2)
    assert z == pytest.approx(POCOCK_CP[k], abs=0.003)


def _family_error(looks: tuple[int, ...], level: float, paths: int = 400_000) -> float:
    """Share of null Brownian paths whose z-statistic crosses the level at some look."""
    rng = np.random.default_rng(20261205)
    t = np.asarray(looks, dtype=float)
    steps = np.diff(np.concatenate([[0.0], t]))
    s = np.cumsum(rng.standard_normal((paths, len(t))) * np.sqrt(steps), axis=1)
    z = stats.norm.isf(level / 2)
    return float((np.abs(s / np.sqrt(t)) >= z).any(axis=1).mean())


@pytest.mark.parametrize("lo, hi", [(2, 6), (3, 5), (2, 10)])
def test_the_playbooks_looks_spend_exactly_the_family_level(lo: int, hi: int) -> None:
    """Looks after rounds lo..hi correlate more than Pocock's looks from 0: his table's
    level for as many looks would spend less than alpha (0.0158 for 5 looks spends
    ~0.045 at rounds 2..6), wasting power at every look."""
    spec = VerdictSpec(repeats={"min": lo, "max": hi}, policy="adaptive", confidence=0.95)
    level = look_alpha(spec)
    err = _family_error(tuple(range(lo, hi + 1)), level)
    assert err == pytest.approx(0.05, abs=0.0015)  # 400,000 paths: one standard error 0.00034
    assert level > pocock_level(tuple(range(1, hi - lo + 2)), 0.05)


def test_one_look_spends_the_whole_level() -> None:
    assert look_alpha(VerdictSpec(repeats={"min": 3, "max": 3}, policy="adaptive")) == pytest.approx(0.05)
    assert look_alpha(VerdictSpec(repeats={"min": 2, "max": 6}, policy="fixed")) == pytest.approx(0.05)
    assert look_alpha(VerdictSpec(repeats={"min": 2, "max": 6}, confidence=0.9)) == pytest.approx(
        pocock_level((2, 3, 4, 5, 6), 0.1))
