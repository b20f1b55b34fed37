"""Stalls screened, a node whose noise moves between experiments, Holm's step-down and
the regime a DEAD END keeps measuring for (campaign/verdict/screen.py, noise.py,
launches.py, judge.py), on synthetic launches with a shared per-launch offset."""

from __future__ import annotations

import math
import random

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelSamples
from campaign.verdict.components import Component
from campaign.verdict.judge import judge, round_decision
from campaign.verdict.noise import estimate, prior_df
from campaign.verdict.screen import screen
from tests.campaign.verdict.test_launches import SPEC, SWEEP, _history, _launch, _samples, _tables


def _log_rows(rows):
    return [[math.log(x) for x in r] for r in rows]


def test_a_stalled_level_is_replaced_and_a_stalled_launch_dropped():
    rng = random.Random(1)
    rows = [[100.0 * c * math.exp(rng.gauss(0, 0.01)) for c in (1, 2, 5, 10, 30, 70, 100, 250)] for _ in range(4)]
    rows[2][1] *= 0.45  # one level of one launch: a host stall
    sc = screen(_log_rows(rows))
    assert (sc.cells, sc.launches, sc.per_level[1]) == (1, 0, 1)
    assert abs(math.exp(sc.table[2][1]) / (100.0 * 2) - 1) < 0.05  # back on its prediction
    single = [[x] for x in (79.1, 78.4, 77.5, 78.1, 76.8, 27.0)]  # the demo's 27 tok/s launch
    sc = screen(_log_rows(single))
    assert sc.launches == 1 and len(sc.table) == 5


def test_high_cells_two_launches_and_gaussian_noise_stay():
    rows = [[100.0, 200.0, 500.0], [101.0, 260.0, 498.0], [99.0, 199.0, 502.0]]
    assert not screen(_log_rows(rows)).any  # far above its prediction: not interference
    assert not screen(_log_rows([[80.0], [40.0]])).any  # two launches: which one is off?
    rng = random.Random(2)
    flagged = sum(screen(_tables([_launch(rng) for _ in range(4)])["parallel"]).any for _ in range(300))
    assert flagged <= 9  # STALL_P: about one table in a hundred


def test_the_prior_counts_for_less_when_the_nodes_noise_moves():
    rng = random.Random(3)
    steady = [_tables([_launch(rng) for _ in range(2)]) for _ in range(30)]
    assert estimate(steady).prior_df is None
    moving = []  # the machine's load sets each experiment's noise: quiet or four times as loud
    for _ in range(30):
        loud = rng.random() < 0.5
        moving.append(
            _tables([_launch(rng, offset=0.04 if loud else 0.01, jitter=0.02 if loud else 0.005) for _ in range(2)])
        )
    d0 = estimate(moving).prior_df
    assert d0 is not None and d0 < 10
    assert prior_df([[Component(ss=1.0, df=1)]]) is None  # one table says nothing


def test_holm_lets_a_clear_loss_free_the_single_stream_win():
    # the seeds' EAGLE-3 after CUDA 13: +5.5% on the single stream, -15..-58% across the sweep
    rng = random.Random(11)
    noise = _history(rng, offset=0.012)
    loss = {1: -15.7, 2: -24.2, 5: -37.6, 10: -46.0, 30: -54.5, 70: -57.5, 100: -57.3, 250: -58.2}
    samples = _samples(rng, 6, lambda c: 5.5 if c == 0 else loss[c], offset=0.012, cand_offset=0.012)
    v = judge(samples, SPEC, noise)
    assert v.kind == "dead_end" and "single_stream" in v.reason and "parallel at every C" in v.reason, v.reason
    single = next(c for c in v.levels if c.workload == "single_stream")
    # decided at Holm's last step: the family's level, not the first step's 1/9 of it
    assert single.winner == "candidate" and single.level_confidence is not None and single.level_confidence < 0.99


def test_a_dead_end_keeps_measuring_while_a_regime_is_within_reach():
    rng = random.Random(12)
    noise = _history(rng, offset=0.012)
    samples = _samples(rng, 2, lambda c: 5.5 if c == 0 else -40.0, offset=0.012, cand_offset=0.012)
    now = judge(samples, SPEC, noise)
    assert now.kind == "dead_end" and "single_stream" not in now.reason
    d = round_decision(samples, SPEC, 2, confounded=False, noise=noise)
    assert d.more and "regime" in d.why
    slower = _samples(rng, 2, lambda c: -40.0, offset=0.012, cand_offset=0.012)
    assert not round_decision(slower, SPEC, 2, confounded=False, noise=noise).more  # nothing to find


def test_one_stalled_launch_no_longer_blinds_a_clear_win():
    # the demo's smaller-cuda-graph: +8.8% everywhere, one candidate launch stalled on the single stream
    rng = random.Random(13)
    noise = _history(rng)
    samples = _samples(rng, 4, lambda c: 8.8)
    s = next(x for x in samples if x.workload == "single_stream")
    stalled = s.candidate[1].output_tokens_per_s * 0.75
    s.candidate[1] = LevelResult(concurrency=1, requests=1, output_tokens_per_s=stalled)
    v = judge(samples, SPEC, noise)
    assert v.kind == "win", v.reason
    assert "stalls screened (single_stream 1 candidate, 0 baseline)" in v.noise
    assert isinstance(samples[0], LevelSamples)


def _stall_launch(samples, side, index, factor):
    """Slow one launch of one side on every level of every workload (a throttled node)."""
    for s in samples:
        rows = getattr(s, side)
        rows[index] = LevelResult(
            concurrency=s.concurrency, requests=1, output_tokens_per_s=rows[index].output_tokens_per_s * factor
        )


def test_two_baseline_launches_that_disagree_like_a_stall_get_a_third():
    # the verdict lab's heavy tail: one baseline launch in the first two 8% slow.  With two
    # launches nothing says which is off; the stopping rule stopped there, inconclusive
    rng = random.Random(21)
    noise = _history(rng, offset=0.01)
    samples = _samples(rng, 2, lambda c: -4.5, offset=0.01, cand_offset=0.01)
    _stall_launch(samples, "baseline", 0, 0.92)
    d = round_decision(samples, SPEC, 2, confounded=False, noise=noise)
    assert d.more and "two launches disagree like a stall on single_stream (baseline), parallel (baseline)" in d.why, (
        d.why
    )
    # a third launch: the screen drops the stalled one, and the loss is within reach
    more = _samples(rng, 1, lambda c: -4.5, offset=0.01, cand_offset=0.01)
    for s, m in zip(samples, more):
        s.candidate.append(m.candidate[0])
        s.baseline.append(m.baseline[0])
    v = judge(samples, SPEC, noise)
    assert "stalls screened (single_stream 0 candidate, 1 baseline; parallel 0 candidate, 1 baseline)" in v.noise
    d3 = round_decision(samples, SPEC, 3, confounded=False, noise=noise)
    assert v.kind == "dead_end" or (d3.more and "within reach" in d3.why), (v.reason, d3.why)


def test_a_candidates_pair_that_disagrees_like_a_stall_gets_a_third_and_an_ordinary_pair_none():
    """A candidate whose two launches sit 8% apart on a node whose launches scatter by 1%
    (the verdict lab's `heavy_tail`): its spread overruled the node's, the projection said
    six rounds would not decide, and a true win stopped inconclusive at two rounds."""
    rng = random.Random(22)
    noise = _history(rng, offset=0.01)
    calm = _samples(rng, 2, lambda c: 0.0, offset=0.01, cand_offset=0.01)
    assert "disagree like a stall" not in round_decision(calm, SPEC, 2, confounded=False, noise=noise).why
    stalled = _samples(rng, 2, lambda c: 0.0, offset=0.01, cand_offset=0.01)
    _stall_launch(stalled, "candidate", 0, 0.92)
    d = round_decision(stalled, SPEC, 2, confounded=False, noise=noise)
    assert d.more and "disagree like a stall on single_stream (candidate), parallel (candidate)" in d.why, d.why


def test_a_third_launch_screens_a_candidate_on_its_own_spread():
    """The reason a candidate's disagreeing pair used to be left alone: at three launches
    the screen, on the node's scale, trimmed the low launch of a candidate twice as noisy
    as the node (in 7% of its tables) and moved its mean up.  On the candidate's own
    spread it trims none; a candidate launch 15% slow is still dropped."""
    from campaign.verdict.sides import side_table

    rng = random.Random(42)
    prior = _history(rng, groups=40, offset=0.01).get("parallel")

    def rows(offset, slow=1.0):
        out = [[f[("parallel", c)] for c in SWEEP] for f in (_launch(rng, offset=offset) for _ in range(3))]
        out[0] = [x * slow for x in out[0]]
        return out

    noisy = [side_table(rows(0.02), prior, candidate=True) for _ in range(400)]
    assert sum(s is not None and s.stalled_launches > 0 for s in noisy) <= 4
    for _ in range(20):
        side = side_table(rows(0.01, slow=0.85), prior, candidate=True)
        assert side is not None and side.stalled_launches == 1


def test_the_screen_weighs_the_nodes_scale_by_what_it_is_worth_to_one_experiment():
    """Where the node's noise moves between experiments, its launch spread counts for
    the moderated prior df in the launch test's cut, as in the variance: a launch 4.7
    launch spreads low is a stall on a steady node's full history, ordinary on a moving
    one.  A stalled cell is still replaced on the moving node."""
    from campaign.verdict.sides import side_table

    rng = random.Random(31)
    noise = _history(rng, groups=40, offset=0.01, jitter=0.002)
    prior = noise.get("parallel")
    spread = math.sqrt(prior.rows.ms / prior.levels)  # one launch mean's sd, log scale
    base = [math.log(100.0 * c / (1 + c / 40)) for c in (1, 2, 5, 10, 30, 70, 100, 250)]
    rows = [[math.exp(x + d) for x in base] for d in (0.0, 0.5 * spread, -4.7 * spread)]
    steady = side_table(rows, prior)
    moving = side_table(rows, prior, prior_df=5.0)
    assert steady is not None and moving is not None
    assert steady.stalled_launches == 1 and steady.r == 2
    assert moving.stalled_launches == 0 and moving.r == 3
    rows[1][3] *= 0.8  # one cell 20% low
    assert side_table(rows, prior, prior_df=5.0).stalled_cells == 1


def test_a_candidate_noisier_than_the_node_keeps_its_ordinary_low_cells():
    """The node's scale is the baseline config's.  A candidate whose levels jitter twice
    as much is screened on its own spread: on the node's scale alone one of its ordinary
    low cells was replaced in about a third of its two-launch tables, moving that level
    up (the verdict lab's `noisy_candidate`: a null candidate called a WIN at C=250).  A
    real stall on the candidate, a cell 15% low, is still replaced at two launches."""
    from campaign.verdict.sides import side_table

    rng = random.Random(41)
    noise = _history(rng, groups=40, offset=0.015, jitter=0.005)
    prior = noise.get("parallel")

    def rows(jitter):
        return [[f[("parallel", c)] for c in SWEEP] for f in (_launch(rng, jitter=jitter) for _ in range(2))]

    noisy = [side_table(rows(0.010), prior, candidate=True) for _ in range(300)]
    assert sum(s is not None and s.stalled_cells > 0 for s in noisy) <= 6
    as_node = [side_table(rows(0.005), prior, candidate=True) for _ in range(300)]
    assert sum(s is not None and s.stalled_cells > 0 for s in as_node) <= 3
    for j in (0, 3, 7):
        stalled = rows(0.005)
        stalled[1][j] *= 0.85
        side = side_table(stalled, prior, candidate=True)
        assert side is not None and side.stalled_cells == 1
