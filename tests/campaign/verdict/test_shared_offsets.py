"""How much of a launch's offset the workloads share (campaign/verdict/shared_offsets.py),
estimated from the node's history against a generator whose correlation is known, and
what it buys: two workloads measured in the same launches count as fewer than two tests
(campaign/verdict/launches.py, multiplicity.py)."""

from __future__ import annotations

import math
import random

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelSamples
from campaign.loop.experiment import _estimate_of
from campaign.verdict.judge import judge
from campaign.verdict.multiplicity import cheverud_nyholt, shared_launch_factor
from campaign.verdict.noise import estimate
from tests.campaign.verdict.test_launches import SPEC, SWEEP

OFFSET, JITTER = 0.012, 0.004


def _group(rng, rho, launches=3):
    """One experiment's baseline launches: the sweep's offset correlates with the single
    stream's by `rho`."""
    out = {"single_stream": [], "parallel": []}
    for _ in range(launches):
        o = rng.gauss(0.0, OFFSET)
        o2 = rho * o + math.sqrt(1 - rho * rho) * rng.gauss(0.0, OFFSET)
        out["single_stream"].append([o + rng.gauss(0.0, JITTER)])
        out["parallel"].append([o2 + rng.gauss(0.0, JITTER) for _ in SWEEP])
    return out


def _truth(rho):
    # the single stream has one level: its "offset" is its whole launch variance
    return rho * OFFSET / math.sqrt(OFFSET**2 + JITTER**2)


def test_the_shared_offset_is_the_generators_at_its_lower_bound():
    for rho in (1.0, 0.6):
        for seed in range(5):
            noise = estimate([_group(random.Random(f"{rho}:{seed}:{g}"), rho) for g in range(60)])
            got = noise.shared_offset("single_stream", "parallel")
            assert got == noise.shared_offset("parallel", "single_stream")
            # a one-sided 95% bound from 120 df: below the truth, and not far below it
            assert _truth(rho) - 0.2 < got < _truth(rho) + 0.03, (rho, seed, got, _truth(rho))
    assert "share each launch's offset" in noise.describe()


def test_workloads_that_move_on_their_own_or_few_launches_share_nothing():
    shown = sum(
        estimate([_group(random.Random(f"0:{seed}:{g}"), 0.0) for g in range(60)]).shared != {} for seed in range(40)
    )
    assert shown <= 5  # a one-sided 95% bound above 0 by chance: about 2 in 40
    assert estimate([_group(random.Random(g), 1.0, launches=2) for g in range(4)]).shared == {}  # 4 df
    groups = [_group(random.Random(g), 1.0) for g in range(60)]
    assert estimate(groups, aligned=[False] * 60).shared == {}  # row i is not the same launch


def test_a_launch_missing_a_level_breaks_the_rows_alignment():
    def side(skip):
        rows = []
        for repeat in range(4):
            rng = random.Random(repeat)
            o = rng.gauss(0.0, OFFSET)
            rows.append((repeat, "single_stream", 1, 90.0 * math.exp(o)))
            rows += [
                (repeat, "parallel", c, 100.0 * c * math.exp(o + rng.gauss(0.0, JITTER)))
                for c in SWEEP
                if not (skip and repeat == 1 and c == 250)
            ]
        return tuple(rows)

    aligned = _estimate_of(tuple(side(False) for _ in range(8)))
    assert aligned.shared_offset("single_stream", "parallel") > 0.5
    # the sweep's launch 1 lacks C=250: its rows are launches 0, 2, 3 against the single
    # stream's 0, 1, 2, 3; nothing is paired by position
    assert _estimate_of(tuple(side(True) for _ in range(8))).shared == {}


def test_cheverud_nyholt_counts_correlated_tests_as_fewer():
    assert cheverud_nyholt([[1.0, 0.0], [0.0, 1.0]]) == 2.0
    assert abs(cheverud_nyholt([[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]) - 2.5) < 1e-9
    assert abs(shared_launch_factor([[1.0, 0.9], [0.9, 1.0]]) - (1 + (1 - 0.81)) / 2) < 1e-9
    assert shared_launch_factor([[4.0, 0.0], [0.0, 1.0]]) == 1.0


def _experiment(effect_pct):
    """Three interleaved rounds, both workloads in each launch, every level +effect."""
    base_o, cand_o = [-0.012, 0.0, 0.012], [0.012, -0.012, 0.0]
    out = []
    for w, levels in (("single_stream", [1]), ("parallel", SWEEP)):
        for k, c in enumerate(levels):
            s = LevelSamples(workload=w, concurrency=c)
            for r in range(3):
                j = JITTER * ((k + r) % 3 - 1)
                s.baseline.append(
                    LevelResult(concurrency=c, requests=1, output_tokens_per_s=1000.0 * math.exp(base_o[r] + j))
                )
                s.candidate.append(
                    LevelResult(
                        concurrency=c,
                        requests=1,
                        output_tokens_per_s=1000.0 * (1 + effect_pct / 100) * math.exp(cand_o[r] - j),
                    )
                )
            out.append(s)
    return out


def test_two_workloads_of_one_launch_are_not_two_independent_tests():
    # the verdict lab's `offset` misses: the single stream and the sweep carry the same
    # common effect (+3.65% and +3.68%) and Holm counted them as two tests
    noise = estimate([_group(random.Random(g), 1.0) for g in range(30)])
    alone = noise.model_copy(deep=True)
    alone.shared = {}
    samples = _experiment(4.9)
    shared, apart = judge(samples, SPEC, noise), judge(samples, SPEC, alone)
    assert shared.kind == "win" and apart.kind == "inconclusive", (shared.reason, apart.reason)
    # the first Holm step: the family's level over about 1.1 tests, not over 2
    conf = {
        v.kind: next(c.level_confidence for c in v.levels if c.workload == "single_stream") for v in (shared, apart)
    }
    assert 1 - conf["win"] > 1.6 * (1 - conf["inconclusive"]), conf
    assert judge(_experiment(1.0), SPEC, noise).kind == "inconclusive"  # no effect: nothing shown
