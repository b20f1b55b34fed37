"""Each level's jitter from pairs of levels (campaign.verdict.pair_jitter), against a
generator's true jitters: the quiet levels are measured, not borrowed from the noisy one."""

from __future__ import annotations

import math
import random

import pytest

from campaign.verdict.components import level_jitter
from campaign.verdict.noise import estimate
from campaign.verdict.pair_jitter import MIN_DF, cross_products, pair_jitter

# one request at C=1 jitters about 16x as much as 250 at C=250 (percent, one launch)
TRUE_SD = [4.0, 2.83, 1.79, 1.26, 0.73, 0.48, 0.40, 0.25]
MU = [math.log(v) for v in (90.0, 160.0, 290.0, 450.0, 700.0, 780.0, 760.0, 770.0)]


def tables(rng: random.Random, groups: int, launches: int, offset_pct: float) -> list[list[list[float]]]:
    """`groups` tables of `launches` launches: level mean + the launch's offset + jitter."""
    out = []
    for _ in range(groups):
        table = []
        for _ in range(launches):
            o = rng.gauss(0.0, offset_pct / 100)
            table.append([m + o + rng.gauss(0.0, sd / 100) for m, sd in zip(MU, TRUE_SD)])
        out.append(table)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_level_is_measured_within_its_spread_from_forty_launches(seed: int) -> None:
    rng = random.Random(seed)
    noise = estimate([{"parallel": t} for t in tables(rng, 10, 4, offset_pct=1.5)])
    w = noise.workloads["parallel"]
    assert w.cross_df == 30 and w.launches == 40
    got = [math.sqrt(v) * 100 for v in w.jitter()]
    ratios = [g / t for g, t in zip(got, TRUE_SD)]
    assert all(0.6 <= r <= 1.6 for r in ratios), [f"{r:.2f}" for r in ratios]


def test_the_moment_estimator_reads_the_quiet_levels_through_the_noisy_one() -> None:
    """Why the pairs: on the same launches, the residual-based estimate of C=250 is a
    multiple of its truth (each level's residual carries every level's jitter)."""
    rng = random.Random(0)
    ts = tables(rng, 50, 4, offset_pct=1.5)
    noise = estimate([{"parallel": t} for t in ts])
    w = noise.workloads["parallel"]
    moment = [math.sqrt(v) * 100 for v in level_jitter(w.cols, w.res.df)]
    pairs = [math.sqrt(v) * 100 for v in w.jitter()]
    assert moment[-1] > 2 * TRUE_SD[-1]
    assert 0.75 * TRUE_SD[-1] <= pairs[-1] <= 1.33 * TRUE_SD[-1]


def test_a_launch_offset_cancels_exactly() -> None:
    rng = random.Random(7)
    quiet = tables(rng, 6, 4, offset_pct=0.0)
    shifted = [[[x + k * 0.03 for x in row] for k, row in enumerate(t)] for t in quiet]  # 3% a launch apart
    df = sum(len(t) - 1 for t in quiet)
    a = pair_jitter(_summed(quiet), df)
    b = pair_jitter(_summed(shifted), df)
    assert a == pytest.approx(b, rel=1e-9)


def test_few_launches_use_the_shrunk_moment_estimator() -> None:
    rng = random.Random(3)
    noise = estimate([{"parallel": t} for t in tables(rng, 2, 3, offset_pct=1.0)])
    w = noise.workloads["parallel"]
    assert w.cross_df == 4 < MIN_DF
    assert w.jitter() == level_jitter(w.cols, w.res.df)


def _summed(ts: list[list[list[float]]]) -> list[list[float]]:
    crosses = [cross_products(t) for t in ts]
    return [[sum(c[a][b] for c in crosses) for b in range(len(MU))] for a in range(len(MU))]
