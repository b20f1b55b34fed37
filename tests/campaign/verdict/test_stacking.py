from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.verdict.stacking import (
    BisectionState,
    bisection_steps,
    expected_stack_delta,
    find_interaction,
    stack_shortfall,
    start_bisection,
)


def test_expected_stack_is_the_product_of_ratios():
    assert expected_stack_delta([9.0, 5.0]) == pytest.approx(14.45)
    assert expected_stack_delta([]) == 0.0
    assert expected_stack_delta([10.0, -10.0]) == pytest.approx(-1.0)


def test_shortfall_beyond_noise_only():
    assert stack_shortfall(14.45, 10.0, noise_pct=2.0)
    assert not stack_shortfall(14.45, 13.5, noise_pct=2.0)
    assert not stack_shortfall(14.45, 20.0, noise_pct=2.0)
    assert not stack_shortfall(-100.0, -100.0, noise_pct=2.0)


def interaction_model(deltas: dict[str, float], pairs: dict[frozenset[str], float]):
    """Synthetic node: parts multiply, each interacting pair present costs its factor."""
    calls: list[list[str]] = []

    def measure(subset: list[str]) -> float:
        calls.append(subset)
        ratio = math.prod(1 + deltas[w] / 100 for w in subset)
        for pair, factor in pairs.items():
            if pair <= set(subset):
                ratio *= factor
        return (ratio - 1) * 100

    return measure, calls


def test_finds_the_interacting_pair_among_eight_wins():
    wins = [f"w{k}" for k in range(8)]
    deltas = {w: 3.0 + k for k, w in enumerate(wins)}
    measure, calls = interaction_model(deltas, {frozenset({"w2", "w5"}): 0.9})
    res = find_interaction(wins, [deltas[w] for w in wins], 2.0, measure)
    assert res.pair == ("w2", "w5")
    assert res.measurements == len(calls) <= 1 + 2 * 3 + 1
    assert calls[0] == wins  # the full stack first


def test_no_interaction_stops_after_the_full_stack():
    wins = ["a", "b", "c"]
    measure, calls = interaction_model(dict.fromkeys(wins, 4.0), {})
    res = find_interaction(wins, [4.0] * 3, 2.0, measure)
    assert res.pair is None and res.measurements == 1 and "adds up" in res.explanation


def test_a_triple_only_interaction_is_reported_as_a_group():
    wins = ["a", "b", "c", "d"]
    deltas = dict.fromkeys(wins, 4.0)

    def measure(subset: list[str]) -> float:
        ratio = 1.04 ** len(subset) * (0.85 if {"a", "b", "c"} <= set(subset) else 1.0)
        return (ratio - 1) * 100

    res = find_interaction(wins, [4.0] * 4, 2.0, measure)
    assert res.pair is None and res.group == ["a", "b", "c"]
    assert "interact together" in res.explanation
    assert deltas  # parts known


def test_state_is_serializable_and_record_is_pure():
    wins = [f"w{k}" for k in range(5)]
    measure, _ = interaction_model(dict.fromkeys(wins, 3.0), {frozenset({"w0", "w4"}): 0.8})
    state = start_bisection(wins, [3.0] * 5, 2.0, full_stack_delta_pct=measure(wins))
    while (subset := state.next_subset()) is not None:
        before = state.model_dump()
        restored = BisectionState.model_validate_json(state.model_dump_json())
        nxt = restored.record(measure(subset))
        assert state.model_dump() == before
        state = nxt
    assert state.result is not None and state.result.pair == ("w0", "w4")
    with pytest.raises(ValueError):
        state.record(0.0)


def test_generator_form_drives_the_same_search():
    wins = ["a", "b", "c"]
    measure, _ = interaction_model(dict.fromkeys(wins, 5.0), {frozenset({"b", "c"}): 0.9})
    gen = bisection_steps(wins, [5.0] * 3, 2.0)
    subset = next(gen)
    with pytest.raises(StopIteration) as stop:
        while True:
            subset = gen.send(measure(subset))
    assert stop.value.value.pair == ("b", "c")


def test_fewer_than_two_wins_need_no_measurement():
    assert start_bisection(["a"], [5.0], 2.0).next_subset() is None


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=2, max_value=16).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True),
            st.lists(st.floats(0.5, 15.0), min_size=n, max_size=n),
        )
    )
)
def test_bisection_finds_any_single_pair_in_logarithmic_measurements(case):
    n, pair_idx, parts = case
    wins = [f"w{k}" for k in range(n)]
    deltas = dict(zip(wins, parts))
    i, j = sorted(pair_idx)
    measure, calls = interaction_model(deltas, {frozenset({wins[i], wins[j]}): 0.9})
    res = find_interaction(wins, parts, 2.0, measure)
    assert res.pair == (wins[i], wins[j])
    assert len(calls) <= 2 + 2 * math.ceil(math.log2(n))
