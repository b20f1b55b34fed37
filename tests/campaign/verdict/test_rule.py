from __future__ import annotations

import pytest

from campaign.domain.models import ConfigChange, Failure, FailureClass, LevelResult
from campaign.domain.records import CorrectnessResult, LevelComparison, LevelSamples, Verdict
from campaign.playbook.schema import LatencyLimit, VerdictSpec
from campaign.verdict.rule import (
    UNBOUNDED_PCT,
    compare_level,
    compare_levels,
    decide,
    headline,
    level_confidence,
    level_winner,
)
from tests.campaign.verdict.fixtures import BASE_PARALLEL, EAGLE_PARALLEL, level, results, sweep

SPEC = VerdictSpec()  # min effect 2%, 95%


def verdict_of(samples: list[LevelSamples], spec: VerdictSpec = SPEC, noise: float = 1.5, **kw) -> Verdict:
    return decide(compare_levels(samples, spec, noise_floor_pct=noise), spec, **kw)


@pytest.mark.parametrize(
    ("delta", "low", "high", "winner"),
    [
        (5.0, 2.1, 7.0, "candidate"),  # wholly above the band
        (3.0, 0.5, 5.5, "tie"),  # excludes 0 but straddles +m: not shown to be worth m
        (1.5, 0.5, 2.5, "tie"),  # excludes 0, point below m
        (0.5, -1.0, 1.9, "tie"),  # inside the band
        (3.0, -1.0, 7.0, "tie"),  # straddles 0
        (-5.0, -7.0, -2.5, "baseline"),
        (-2.5, -3.0, -0.1, "tie"),
        (2.0, 2.0, 2.0, "tie"),  # exactly at the edge is not beyond it
    ],
)
def test_level_winner_rule(delta, low, high, winner):
    assert level_winner(delta, low, high, 2.0) == winner


def test_eagle_mixed_regime_is_a_dead_end_naming_both_regimes():
    v = verdict_of([level("single_stream", 1, 89.5, 96.1)] + sweep(BASE_PARALLEL, EAGLE_PARALLEL))
    assert v.kind == "dead_end" and v.failure_class is None
    assert v.regimes == {"single_stream": "candidate", "parallel": "baseline"}
    assert v.reason.startswith("wins single_stream (+7.")
    assert "but loses parallel at every C (1-250; -57.8% to -16.2%)" in v.reason
    assert v.headline_delta_pct == pytest.approx(96.1 / 89.5 * 100 - 100, abs=0.3)
    assert len(v.levels) == 9


def test_smaller_cuda_graph_is_a_win():
    v = verdict_of([level("single_stream", 1, 82.0, 89.5)])
    assert v.kind == "win"
    assert v.reason == "wins single_stream (+9.3%)"
    assert v.regimes == {"single_stream": "candidate"}


def test_win_with_possible_loss_elsewhere_is_not_a_win():
    # -1% truth across the sweep: one-sided bounds near -3% cannot rule out a 2% loss there
    cand = [x * 0.99 for x in BASE_PARALLEL]
    v = verdict_of([level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, cand))
    assert v.kind == "inconclusive"
    assert v.reason.startswith("wins single_stream (+9.3%) but a loss beyond 2% is not ruled out at parallel C=")


def test_no_loss_check_is_per_level_not_bonferroni():
    # +1.5% truth across the sweep: the Bonferroni intervals (99.4% each) reach below -2%,
    # but "no level loses more than 2%" is an intersection-union test, each level at 95%
    cand = [x * 1.015 for x in BASE_PARALLEL]
    cmp = compare_levels(
        [level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, cand), SPEC, noise_floor_pct=1.5
    )
    parallel = [c for c in cmp if c.workload == "parallel"]
    assert all(c.ci_low_pct < -2.0 < c.loss_bound_pct < c.delta_pct for c in parallel)
    v = decide(cmp, SPEC)
    assert v.kind == "win" and v.regimes == {"single_stream": "candidate", "parallel": "tie"}


def test_records_without_a_loss_bound_fall_back_to_the_interval():
    cmp = compare_levels(
        [level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, [x * 1.015 for x in BASE_PARALLEL]),
        SPEC,
        noise_floor_pct=1.5,
    )
    old = [c.model_copy(update={"loss_bound_pct": None}) for c in cmp]
    assert decide(old, SPEC).kind == "inconclusive"


def test_noise_floor_per_workload():
    # a steady +5% single stream next to a sweep whose pooled noise is 6%: with one pooled
    # floor the single stream is a tie; with its own it is the win it measures
    def runs(*tps: float) -> list[LevelResult]:
        return [LevelResult(concurrency=1, requests=6, output_tokens_per_s=x) for x in tps]

    steady = LevelSamples(
        workload="single_stream",
        concurrency=1,  # EAGLE-3 on CUDA 13, as measured
        baseline=runs(89.22, 89.36),
        candidate=runs(93.71, 93.79),
    )
    samples = [steady] + sweep(BASE_PARALLEL, [x * 0.5 for x in BASE_PARALLEL], 2)
    pooled = compare_levels(samples, SPEC, noise_floor_pct=6.1, noise_floor_df=18)
    own = compare_levels(
        samples, SPEC, noise_floor_pct=6.1, noise_floor_df=18, noise_by_workload={"single_stream": (0.1, 1)}
    )
    assert pooled[0].winner == "tie" and own[0].winner == "candidate"
    assert [c.ci_low_pct for c in pooled[1:]] == [c.ci_low_pct for c in own[1:]]  # the sweep keeps the pooled floor
    assert decide(own, SPEC).regimes == {"single_stream": "candidate", "parallel": "baseline"}


def test_win_with_ties_elsewhere_says_so():
    v = verdict_of([level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, BASE_PARALLEL), noise=0.5)
    assert v.kind == "win"
    assert v.reason == "wins single_stream (+9.3%); no significant difference elsewhere"
    assert v.regimes["parallel"] == "tie"


def test_custom_allreduce_is_slower():
    v = verdict_of([level("single_stream", 1, 89.5, 38.0)])
    assert v.kind == "dead_end" and v.reason == "slower: loses single_stream (-57.5%)"


def test_partial_loss_names_the_levels():
    cand = list(BASE_PARALLEL)
    cand[-2:] = [x * 0.8 for x in BASE_PARALLEL[-2:]]
    v = verdict_of(sweep(BASE_PARALLEL, cand))
    assert v.kind == "dead_end"
    assert v.reason == "slower: loses parallel at C=100,250 (-19.9%); no significant difference elsewhere"


def test_within_noise_is_inconclusive():
    v = verdict_of([level("single_stream", 1, 89.5, 89.7)] + sweep(BASE_PARALLEL, [x * 1.003 for x in BASE_PARALLEL]))
    assert v.kind == "inconclusive"
    assert v.reason.startswith("within noise (±") and "2% minimum effect at 95% confidence" in v.reason


def test_single_repeat_without_noise_floor_is_undetermined():
    cmp = compare_levels([level("single_stream", 1, 89.5, 95.0, repeats=1)], SPEC)
    assert cmp[0].winner == "tie" and cmp[0].ci_high_pct == UNBOUNDED_PCT
    v = decide(cmp, SPEC)
    assert v.kind == "inconclusive" and "undetermined" in v.reason
    Verdict.model_validate_json(v.model_dump_json())  # finite numbers survive the store


def test_crash_is_a_dead_end_with_its_class_and_revisit_components():
    f = Failure(failure_class=FailureClass.jit_error, summary="FlashInfer JIT does not support SM120")
    v = decide([], SPEC, failure=f, revisit_on=["flashinfer"])
    assert v.kind == "dead_end" and v.failure_class == FailureClass.jit_error
    assert v.reason == "FlashInfer JIT does not support SM120"
    assert v.revisit_on == ["cuda", "arch", "engine_version", "flashinfer"]
    assert v.headline_delta_pct is None


def test_infrastructure_failure_is_not_a_dead_end():
    f = Failure(failure_class=FailureClass.port_in_use, summary="address already in use")
    v = decide([], SPEC, failure=f)
    assert v.kind == "inconclusive" and v.reason == "infrastructure failure (port_in_use): address already in use"


def test_failed_correctness_is_a_dead_end_even_when_faster():
    cmp = compare_levels([level("single_stream", 1, 82.0, 120.0)], SPEC, noise_floor_pct=1.5)
    bad = CorrectnessResult(prompts=8, mismatches=3, tolerance=0.0, passed=False)
    v = decide(cmp, SPEC, correctness=bad)
    assert v.kind == "dead_end" and v.failure_class == FailureClass.incorrect
    assert v.reason == "incorrect: 3 of 8 greedy outputs differ from the baseline's (tolerance 0%)"
    assert v.correctness == bad


def test_confounded_is_inconclusive_naming_the_settings():
    cmp = compare_levels([level("single_stream", 1, 82.0, 89.5)], SPEC, noise_floor_pct=1.5)
    one = [ConfigChange(kind="flag", key="mem-fraction-static", before=0.88, after=0.85, change="changed")]
    v = decide(cmp, SPEC, confounded_by=one)
    assert v.kind == "inconclusive"
    assert v.reason == (
        "confounded: mem-fraction-static (0.88 -> 0.85) differs from the baseline but the hypothesis does not declare it"
    )
    two = one + [ConfigChange(kind="env", key="NCCL_ALGO", after="Tree", change="added")]
    assert decide(cmp, SPEC, confounded_by=two).reason == (
        "confounded: mem-fraction-static (0.88 -> 0.85), NCCL_ALGO (set to Tree) differ from the baseline "
        "but the hypothesis does not declare them"
    )


def test_latency_limit_decides_levels_where_only_one_side_meets_it():
    spec = VerdictSpec(latency_limit=LatencyLimit(metric="ttft_ms", stat="p99", max_ms=500))
    slow_but_in_limit = LevelSamples(
        workload="parallel",
        concurrency=250,
        baseline=results(772.0, 3, p99_ttft=900.0),
        candidate=results(740.0, 3, p99_ttft=400.0, phase=1),
    )
    same = LevelSamples(
        workload="parallel", concurrency=1, baseline=results(92.6, 3), candidate=results(92.6, 3, phase=1)
    )
    cmp = compare_levels([same, slow_but_in_limit], spec, noise_floor_pct=0.5)
    assert cmp[1].delta_pct < -2 and cmp[1].winner == "candidate"
    assert (cmp[1].baseline_meets_limit, cmp[1].candidate_meets_limit) == (False, True)
    v = decide(cmp, spec)
    assert v.kind == "win"
    assert v.reason.endswith("; ttft_ms p99 <= 500 ms is met only by the candidate at parallel C=250")


def test_bonferroni_widens_intervals_with_more_levels():
    assert level_confidence(0.95, 9) == pytest.approx(1 - 0.05 / 9)
    one = compare_levels([level("single_stream", 1, 100.0, 103.0)], SPEC, noise_floor_pct=1.5)[0]
    many = compare_levels(
        [level("single_stream", 1, 100.0, 103.0)] + sweep(BASE_PARALLEL, BASE_PARALLEL), SPEC, noise_floor_pct=1.5
    )[0]
    assert many.ci_high_pct - many.ci_low_pct > one.ci_high_pct - one.ci_low_pct


def test_zero_baseline_is_clamped_and_won_by_the_candidate():
    c = compare_level("w", 1, results(0.0, 2), results(50.0, 2), SPEC, paired=True)
    assert c.delta_pct == c.ci_low_pct == UNBOUNDED_PCT and c.winner == "candidate"


def test_a_side_without_repeats_is_a_caller_error():
    with pytest.raises(ValueError):
        compare_level("w", 1, [], results(50.0, 2), SPEC, paired=False)


def test_headline_uses_primary_workload_lowest_concurrency():
    cmp = compare_levels(
        [level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, EAGLE_PARALLEL), SPEC, noise_floor_pct=1.5
    )
    assert headline(cmp) == pytest.approx(cmp[0].delta_pct)
    assert headline(cmp, "parallel") == pytest.approx(77.5 / 92.6 * 100 - 100, abs=0.5)
    assert decide(cmp, SPEC, primary_workload="parallel").headline_delta_pct == headline(cmp, "parallel")
    assert headline([]) is None


def test_no_measurements_is_inconclusive():
    assert decide([], SPEC).reason == "no measurements to compare"


def test_paired_default_follows_interleave_setting():
    drift = LevelSamples(
        workload="w",
        concurrency=1,
        baseline=results(100.0, 1) + results(110.0, 1) + results(120.0, 1),
        candidate=results(105.0, 1) + results(115.5, 1) + results(126.0, 1),
    )
    paired = compare_levels([drift], SPEC)[0]
    unpaired = compare_levels([drift], VerdictSpec(interleave=False))[0]
    assert paired.winner == "candidate" and unpaired.winner == "tie"
    assert isinstance(paired, LevelComparison)


# ------------------------------------------------------------------ adaptive repeats
from campaign.verdict.rule import level_settled, levels_needing_repeats, needs_more_repeats, workloads_needing_repeats  # noqa: E402

ADAPTIVE = VerdictSpec(repeats={"min": 1, "max": 6})


def _cmp(base: float, cand: float, n: int, spec: VerdictSpec = ADAPTIVE) -> list[LevelComparison]:
    samples = [level("single_stream", 1, base, cand, repeats=n)] + sweep(BASE_PARALLEL, EAGLE_PARALLEL, repeats=n)
    return compare_levels(samples, spec, noise_floor_pct=1.5)


def test_fixed_policy_runs_exactly_min_repeats():
    fixed = VerdictSpec(policy="fixed", repeats={"min": 3, "max": 6})
    straddling = _cmp(89.5, 96.1, 1, fixed)
    assert not level_settled(straddling[0], 2.0)
    assert needs_more_repeats(straddling, fixed, 2) is True
    assert needs_more_repeats(straddling, fixed, 3) is False


def test_adaptive_never_stops_below_min_or_runs_past_max():
    spec = VerdictSpec(repeats={"min": 2, "max": 4})
    clear = _cmp(89.5, 38.0, 1, spec)
    assert needs_more_repeats(clear, spec, 1) is True
    assert needs_more_repeats(clear, spec, 2) is False
    straddling = _cmp(89.5, 96.1, 1, spec)
    assert needs_more_repeats(straddling, spec, 4) is False


def test_adaptive_stops_when_every_interval_is_clear_of_the_band_edges():
    clear = _cmp(89.5, 38.0, 1)
    assert all(level_settled(c, 2.0) for c in clear)
    assert needs_more_repeats(clear, ADAPTIVE, 1) is False


def test_adaptive_continues_while_a_settleable_interval_straddles_an_edge():
    # EAGLE single stream, +7.4%: one repeat straddles +2%, three settle it
    assert needs_more_repeats(_cmp(89.5, 96.1, 1), ADAPTIVE, 1) is True
    assert workloads_needing_repeats(_cmp(89.5, 96.1, 1), ADAPTIVE) == ["single_stream"]
    assert needs_more_repeats(_cmp(89.5, 96.1, 2), ADAPTIVE, 2) is True
    assert needs_more_repeats(_cmp(89.5, 96.1, 3), ADAPTIVE, 3) is False


def test_adaptive_futility_stop_when_max_repeats_could_not_settle():
    near_zero = _cmp(89.5, 89.7, 1)
    assert not level_settled(near_zero[0], 2.0)
    assert levels_needing_repeats(near_zero, ADAPTIVE) == []
    assert needs_more_repeats(near_zero, ADAPTIVE, 1) is False


def test_adaptive_measures_when_nothing_is_known_yet():
    unknown = compare_levels([level("single_stream", 1, 89.5, 95.0, repeats=1)], ADAPTIVE)  # no noise floor
    assert needs_more_repeats(unknown, ADAPTIVE, 1) is True


def test_adaptive_accepts_raw_samples():
    samples = [level("single_stream", 1, 89.5, 94.0, repeats=1)]  # +5%, one level
    assert needs_more_repeats(samples, ADAPTIVE, 1, noise_floor_pct=1.5) is True
    assert (
        needs_more_repeats([level("single_stream", 1, 89.5, 38.0, repeats=1)], ADAPTIVE, 1, noise_floor_pct=1.5)
        is False
    )


def test_adaptive_repeats_a_level_that_blocks_a_win():
    # -0.5% truth across the sweep: a 2% loss is not ruled out after 3 rounds, but 6 could
    samples = [level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, [x * 0.995 for x in BASE_PARALLEL])
    cmp = compare_levels(samples, ADAPTIVE, noise_floor_pct=1.5)
    assert any(c.winner == "candidate" for c in cmp)
    assert decide(cmp, ADAPTIVE).kind == "inconclusive"
    blocking = levels_needing_repeats(cmp, ADAPTIVE)
    assert blocking and all(c.workload == "parallel" and c.loss_bound_pct < -2 for c in blocking)
    assert needs_more_repeats(cmp, ADAPTIVE, 3) is True


def test_adaptive_gives_up_on_a_loss_that_max_repeats_cannot_rule_out():
    # -1% truth: even 6 rounds would leave the one-sided bound below -2%
    samples = [level("single_stream", 1, 82.0, 89.5)] + sweep(BASE_PARALLEL, [x * 0.99 for x in BASE_PARALLEL])
    cmp = compare_levels(samples, ADAPTIVE, noise_floor_pct=1.5)
    assert any(c.loss_bound_pct < -2 for c in cmp)
    assert levels_needing_repeats(cmp, ADAPTIVE) == []


def test_futility_counts_the_t_quantile_shrinking_with_more_repeats():
    # EAGLE-3's CUDA 13 single stream as measured: +4.3% over 2 rounds, a per-workload noise
    # prior with 1 df: t(2 df) makes the interval +-11%; six rounds (t at 6 df) could show
    # the win, so the level is worth repeating, though sqrt(2/6) alone says it is not
    runs = lambda *xs: [LevelResult(concurrency=1, requests=6, output_tokens_per_s=x) for x in xs]  # noqa: E731
    s = LevelSamples(workload="single_stream", concurrency=1, baseline=runs(89.09, 89.12), candidate=runs(93.52, 92.28))
    spec = VerdictSpec(repeats={"min": 2, "max": 6})
    c = compare_level(
        s.workload,
        1,
        s.baseline,
        s.candidate,
        spec,
        paired=True,
        noise_floor_pct=0.91,
        noise_floor_df=1,
        confidence=level_confidence(0.95, 9),
    )  # one of the campaign's 9 levels
    assert c.winner == "tie" and c.df == 2 and c.ci_low_pct < -5
    assert levels_needing_repeats([c], spec) == [c]
    assert levels_needing_repeats([c.model_copy(update={"df": None})], spec) == []  # the old projection
