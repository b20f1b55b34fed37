from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.verdict.stats import drift, mean, noise_estimate, noise_floor, quantile, relative_effect, stdev


def test_mean_and_stdev_plain_numbers():
    assert mean([1.0, 2.0, 3.0]) == 2.0
    assert stdev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(2.138, abs=1e-3)
    assert stdev([5.0]) == 0.0
    with pytest.raises(ValueError):
        mean([])


def test_quantile_t_and_normal():
    assert quantile(0.95, 1) == pytest.approx(12.706, abs=1e-3)
    assert quantile(0.95, math.inf) == pytest.approx(1.960, abs=1e-3)


def test_paired_interval_matches_hand_computation():
    b, c = [100.0, 102.0, 98.0], [110.0, 111.0, 109.0]
    eff = relative_effect(b, c, paired=True)
    r = [math.log(y / x) for x, y in zip(b, c)]
    half = 4.302653 * stdev(r) / math.sqrt(3)  # t(0.975, df=2)
    assert eff.method == "paired" and eff.df == 2
    assert eff.delta_pct == pytest.approx(10.0)
    assert eff.low_pct == pytest.approx(math.expm1(math.log(1.1) - half) * 100, rel=1e-6)
    assert eff.high_pct == pytest.approx(math.expm1(math.log(1.1) + half) * 100, rel=1e-6)


def test_pairing_cancels_drift_that_welch_cannot():
    drifting = [100.0, 110.0, 120.0, 130.0]
    cand = [x * 1.05 for x in drifting]
    paired = relative_effect(drifting, cand, paired=True)
    welch = relative_effect(drifting, cand, paired=False)
    assert paired.low_pct == pytest.approx(5.0) and paired.high_pct == pytest.approx(5.0)
    assert welch.method == "welch" and welch.low_pct < 0 < welch.high_pct


def test_unequal_lengths_fall_back_to_welch():
    eff = relative_effect([100.0, 101.0], [105.0, 106.0, 104.0], paired=True)
    assert eff.method == "welch"


def test_single_repeat_without_prior_is_undetermined():
    eff = relative_effect([100.0], [110.0])
    assert eff.method == "undetermined" and not eff.determined
    assert eff.low_pct == -100.0 and math.isinf(eff.high_pct)


def test_single_repeat_with_noise_floor_uses_prior_df():
    eff = relative_effect([100.0], [110.0], noise_floor_pct=1.5, noise_floor_df=8)
    assert eff.determined and eff.df == 8
    assert 0 < eff.low_pct < 10 < eff.high_pct < 20


def test_one_side_single_repeat_borrows_other_side_variance():
    eff = relative_effect([100.0], [110.0, 112.0, 108.0])
    assert eff.method == "welch" and eff.df == 2 and eff.low_pct < 10 < eff.high_pct


def test_identical_samples_give_a_point_interval():
    eff = relative_effect([100.0, 100.0], [100.0, 100.0], paired=True)
    assert (eff.delta_pct, eff.low_pct, eff.high_pct) == (0.0, 0.0, 0.0)


def test_zero_variance_with_prior_is_widened_by_the_prior():
    eff = relative_effect([100.0, 100.0], [100.0, 100.0], paired=True, noise_floor_pct=2.0)
    assert eff.low_pct < 0 < eff.high_pct


def test_zero_means():
    assert relative_effect([0.0, 0.0], [0.0]).delta_pct == 0.0
    up = relative_effect([0.0], [5.0])
    assert math.isinf(up.delta_pct) and math.isinf(up.low_pct)
    down = relative_effect([50.0], [0.0, 0.0])
    assert down.delta_pct == down.low_pct == down.high_pct == -100.0


def test_a_zero_sample_uses_the_linear_interval():
    eff = relative_effect([100.0, 0.0, 100.0], [100.0, 100.0, 100.0])
    assert eff.method == "linear"
    assert eff.delta_pct == pytest.approx(50.0)
    assert eff.low_pct >= -100.0 and eff.high_pct > 50.0


def test_bad_samples_are_rejected():
    with pytest.raises(ValueError):
        relative_effect([], [1.0])
    with pytest.raises(ValueError):
        relative_effect([-1.0], [1.0])
    with pytest.raises(ValueError):
        relative_effect([math.nan], [1.0])


def test_noise_floor_pools_cv_by_degrees_of_freedom():
    levels = {1: [100.0, 102.0, 98.0], 2: [50.0, 51.0], 3: [7.0]}
    cv1, cv2 = 2.0 / 100.0, stdev([50.0, 51.0]) / 50.5
    expected = math.sqrt((2 * cv1**2 + 1 * cv2**2) / 3) * 100
    assert noise_floor(levels) == pytest.approx(expected)
    assert noise_estimate(levels).df == 3
    assert noise_floor([[10.0, 10.0], [20.0, 20.0]]) == 0.0


def test_noise_floor_needs_repeats():
    assert noise_estimate({1: [100.0]}) is None
    with pytest.raises(ValueError):
        noise_floor({1: [100.0], 2: [3.0]})


def test_drift_significant_only_beyond_noise():
    moved = drift([100.0, 101.0, 99.5], [105.0, 106.0, 104.5], noise_pct=1.0)
    assert moved.significant and moved.pct == pytest.approx(5.0, abs=0.1)
    small = drift([100.0, 100.2, 99.9], [100.8, 100.9, 101.0], noise_pct=1.5)
    assert not small.significant  # tight samples, but below the noise floor
    single = drift([100.0], [100.5], noise_pct=1.5)
    assert not single.significant and single.low_pct < 0 < single.high_pct


positive = st.floats(min_value=1.0, max_value=1e4, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(positive, min_size=1, max_size=6), st.lists(positive, min_size=1, max_size=6), st.booleans())
def test_interval_contains_point_and_is_ordered(b, c, paired):
    eff = relative_effect(b, c, paired=paired, noise_floor_pct=2.0)
    assert eff.low_pct <= eff.delta_pct * (1 + 1e-9) + 1e-9
    assert eff.delta_pct <= eff.high_pct * (1 + 1e-9) + 1e-9
    assert eff.low_pct >= -100.0


@settings(max_examples=100, deadline=None)
@given(st.lists(positive, min_size=2, max_size=6), st.floats(min_value=0.2, max_value=5.0))
def test_scaling_candidate_shifts_effect_exactly(b, factor):
    eff = relative_effect(b, [x * factor for x in b], paired=True)
    assert eff.delta_pct == pytest.approx((factor - 1) * 100, rel=1e-9, abs=1e-9)
    assert eff.low_pct == pytest.approx(eff.high_pct, rel=1e-9, abs=1e-9)
