"""The verdict: a pure function of measurements and the playbook's verdict policy.

The graph builds the per-level comparisons on the node's noise model with launches as
the unit (`campaign.verdict.launches`, driven by `campaign.verdict.judge`); the per-level
intervals below (`compare_levels`, `relative_effect`) remain the fallback for samples
that model cannot take (a zero figure, a single launch without a prior).  `decide` and
the level rule are shared by both.

Level rule (min effect m, interval [lo, hi] of delta% at the per-level confidence):
* candidate when the whole interval lies above +m (lo > m); baseline when it lies below
  -m (hi < -m); tie otherwise: inside [-m, +m] (no effect worth having) or straddling a
  band edge (not shown either way).  The looser "side of the point estimate when the
  interval excludes 0" was rejected: on null effects it gave false wins and dead ends
  (3-5 false wins and dead ends in 80 null experiments; the margin rule: none, with no
  true effect missed; `bench/verdict_lab.py` measures it now).
Latency limit: where exactly one side meets it (mean over repeats of the chosen latency
statistic <= max_ms), that side wins the level whatever the throughput; where neither
meets it the throughput rule stands.
Multiple levels: each level's interval uses confidence 1 - (1 - c) / k for k levels
(Bonferroni), so a claim that the candidate wins *some* level holds at confidence c.
The other half of a WIN, "no level loses more than m", must hold at *every* level: an
intersection-union test (Berger 1982), which keeps level 1 - c with each level tested
alone at it, so that check uses each level's one-sided lower bound at c
(`loss_bound_pct`), not the Bonferroni interval.  Bonferroni there would demand a
99.7% bound at each of 9 levels and call real wins inconclusive for no gain in rigour.

Experiment rule (`decide`), first match wins: a launch/serving failure -> dead end with
its class (infrastructure failures -> inconclusive, they are retried); failed
correctness -> dead end `incorrect`; undeclared config differences, requested or
reported by the servers, and declared flags a server ignored or overrode -> inconclusive
(confounded, `campaign.verdict.confound`); candidate wins some level, loses none and no level's interval reaches
below -m (one-sided bound, see above) -> WIN (a possible loss beyond m -> inconclusive,
naming the levels); it wins
some and loses some -> dead end naming the regimes each side wins; it loses some and wins none -> dead
end "slower"; otherwise inconclusive "within noise".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from campaign.domain.models import (
    INFRASTRUCTURE_FAILURES,
    ConfigChange,
    Failure,
    FailureClass,
    LevelResult,
    ReportedChange,
)
from campaign.domain.records import CorrectnessResult, LevelComparison, LevelSamples, Verdict, Winner
from campaign.playbook.schema import VerdictSpec
from campaign.verdict.reasons import UNBOUNDED_PCT, confound_reason, latency_note, noise_reason, side_phrase
from campaign.verdict.revisit import revisit_components
from campaign.verdict.stats import DEFAULT_NOISE_FLOOR_DF, mean, quantile, relative_effect

Regime = str  # "candidate" | "baseline" | "mixed" | "tie"


def _finite(x: float) -> float:
    return max(-UNBOUNDED_PCT, min(UNBOUNDED_PCT, x))


def level_confidence(confidence: float, levels: int) -> float:
    """Bonferroni: the per-level confidence that keeps the family at `confidence`."""
    return 1.0 - (1.0 - confidence) / max(1, levels)


def level_winner(delta_pct: float, low_pct: float, high_pct: float, min_effect_pct: float) -> Winner:
    """The throughput rule for one level (see module doc)."""
    if low_pct > min_effect_pct and delta_pct > min_effect_pct:
        return "candidate"
    if high_pct < -min_effect_pct and delta_pct < -min_effect_pct:
        return "baseline"
    return "tie"


def _meets_limit(results: Sequence[LevelResult], spec: VerdictSpec) -> bool | None:
    lim = spec.latency_limit
    if lim is None or not results:
        return None
    return mean([getattr(getattr(r, lim.metric), lim.stat) for r in results]) <= lim.max_ms


def compare_level(
    workload: str,
    concurrency: int,
    baseline: list[LevelResult],
    candidate: list[LevelResult],
    spec: VerdictSpec,
    *,
    paired: bool,
    noise_floor_pct: float | None = None,
    noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
    confidence: float | None = None,
) -> LevelComparison:
    """Candidate vs baseline at one level; `confidence` defaults to the spec's."""
    if not baseline or not candidate:
        raise ValueError(f"{workload} C={concurrency}: both sides need at least one repeat")
    from campaign.verdict.multiplicity import one_sided_confidence  # scipy: the journal reads rules, not levels

    b = [float(getattr(r, spec.metric)) for r in baseline]
    c = [float(getattr(r, spec.metric)) for r in candidate]
    eff = relative_effect(
        b,
        c,
        confidence=confidence or spec.confidence,
        paired=paired,
        noise_floor_pct=noise_floor_pct,
        noise_floor_df=noise_floor_df,
    )
    winner = level_winner(eff.delta_pct, eff.low_pct, eff.high_pct, spec.min_effect_pct)
    one_sided = relative_effect(  # its lower end is the one-sided bound at spec.confidence
        b,
        c,
        confidence=one_sided_confidence(spec),
        paired=paired,
        noise_floor_pct=noise_floor_pct,
        noise_floor_df=noise_floor_df,
    )
    b_ok, c_ok = _meets_limit(baseline, spec), _meets_limit(candidate, spec)
    if b_ok is not None and c_ok is not None and b_ok != c_ok:
        winner = "candidate" if c_ok else "baseline"
    return LevelComparison(
        workload=workload,
        concurrency=concurrency,
        metric=spec.metric,
        baseline_mean=mean(b),
        candidate_mean=mean(c),
        delta_pct=_finite(eff.delta_pct),
        ci_low_pct=_finite(eff.low_pct),
        ci_high_pct=_finite(eff.high_pct),
        loss_bound_pct=_finite(one_sided.low_pct),
        df=eff.df if math.isfinite(eff.df) else None,
        level_confidence=confidence or spec.confidence,
        n_baseline=len(b),
        n_candidate=len(c),
        winner=winner,
        baseline_meets_limit=b_ok,
        candidate_meets_limit=c_ok,
    )


def compare_levels(
    samples: list[LevelSamples],
    spec: VerdictSpec,
    *,
    paired: bool | None = None,
    noise_floor_pct: float | None = None,
    noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
    noise_by_workload: Mapping[str, tuple[float, int]] | None = None,
) -> list[LevelComparison]:
    """Every level, Bonferroni-corrected.  `paired=None`: spec.interleave and equal
    repeat counts at the level (interleaved repeats come in pairs).  A workload found
    in `noise_by_workload` uses its own (pct, df) noise floor, others the pooled one:
    a steady single stream is not as noisy as one short wave of 250 requests."""
    conf = level_confidence(spec.confidence, len(samples))
    out = []
    for s in samples:
        pair = spec.interleave and len(s.baseline) == len(s.candidate) if paired is None else paired
        pct, df = (noise_by_workload or {}).get(s.workload, (noise_floor_pct, noise_floor_df))
        out.append(
            compare_level(
                s.workload,
                s.concurrency,
                s.baseline,
                s.candidate,
                spec,
                paired=pair,
                noise_floor_pct=pct,
                noise_floor_df=df,
                confidence=conf,
            )
        )
    return out


# ----------------------------------------------------------------------- decide
def _by_workload(comparisons: Sequence[LevelComparison]) -> dict[str, list[LevelComparison]]:
    out: dict[str, list[LevelComparison]] = {}
    for c in comparisons:
        out.setdefault(c.workload, []).append(c)
    return {w: sorted(cs, key=lambda c: c.concurrency) for w, cs in out.items()}


def regime(levels: Sequence[LevelComparison]) -> Regime:
    wins = any(c.winner == "candidate" for c in levels)
    losses = any(c.winner == "baseline" for c in levels)
    return "mixed" if wins and losses else "candidate" if wins else "baseline" if losses else "tie"


def headline(comparisons: Sequence[LevelComparison], primary_workload: str | None = None) -> float | None:
    """The primary workload's (default: the first one) delta at its lowest concurrency."""
    groups = _by_workload(comparisons)
    if not groups:
        return None
    cs = groups.get(primary_workload) if primary_workload else None
    return (cs or next(iter(groups.values())))[0].delta_pct


def decide(
    comparisons: Sequence[LevelComparison],
    spec: VerdictSpec,
    *,
    failure: Failure | None = None,
    confounded_by: Sequence[ConfigChange] = (),
    correctness: CorrectnessResult | None = None,
    revisit_on: Sequence[str] = (),
    primary_workload: str | None = None,
    reported_diff: Sequence[ReportedChange] = (),
) -> Verdict:
    """Turn per-level comparisons into one verdict (rules in the module doc); the
    confounders come from `campaign.verdict.confound.check`."""
    levels = list(comparisons)
    groups = _by_workload(levels)
    regimes = {w: regime(cs) for w, cs in groups.items()}
    common = dict(
        levels=levels,
        regimes=regimes,
        confidence=spec.confidence,
        min_effect_pct=spec.min_effect_pct,
        correctness=correctness,
        confounded_by=list(confounded_by),
        headline_delta_pct=headline(levels, primary_workload),
        reported_diff=list(reported_diff),
    )
    if failure is not None:
        cls = failure.failure_class
        summary = failure.summary.strip() or f"{cls.value} during {failure.phase}"
        if cls in INFRASTRUCTURE_FAILURES:
            return Verdict(
                kind="inconclusive",
                reason=f"infrastructure failure ({cls.value}): {summary}",
                failure_class=cls,
                revisit_on=list(revisit_on),
                **common,
            )
        return Verdict(
            kind="dead_end",
            reason=summary,
            failure_class=cls,
            revisit_on=revisit_components(cls, list(revisit_on)),
            **common,
        )
    if correctness is not None and not correctness.passed:
        reason = (
            f"incorrect: {correctness.mismatches} of {correctness.prompts} greedy outputs differ from the "
            f"baseline's (tolerance {correctness.tolerance:.0%})"
        )
        return Verdict(
            kind="dead_end",
            reason=reason,
            failure_class=FailureClass.incorrect,
            revisit_on=revisit_components(FailureClass.incorrect, list(revisit_on)),
            **common,
        )
    if confounded_by:
        return Verdict(
            kind="inconclusive", reason=confound_reason(confounded_by), revisit_on=list(revisit_on), **common
        )
    if not levels:
        return Verdict(kind="inconclusive", reason="no measurements to compare", revisit_on=list(revisit_on), **common)

    wins = any(c.winner == "candidate" for c in levels)
    losses = any(c.winner == "baseline" for c in levels)
    ties = "; no significant difference elsewhere" if any(c.winner == "tie" for c in levels) else ""
    note = latency_note(groups, spec)
    declared = revisit_components(None, list(revisit_on))
    doubtful = {w: [c for c in cs if _loss_not_ruled_out(c, spec)] for w, cs in groups.items()}
    doubtful = {w: cs for w, cs in doubtful.items() if cs}
    if wins and not losses and doubtful:
        where = ", ".join(f"{w} C={','.join(str(c.concurrency) for c in cs)}" for w, cs in doubtful.items())
        reason = (
            f"wins {side_phrase(groups, 'candidate')} but a loss beyond {spec.min_effect_pct:g}% "
            f"is not ruled out at {where}{note}"
        )
        return Verdict(kind="inconclusive", reason=reason, revisit_on=declared, **common)
    if wins and not losses:
        return Verdict(
            kind="win", reason=f"wins {side_phrase(groups, 'candidate')}{ties}{note}", revisit_on=declared, **common
        )
    if wins and losses:
        reason = f"wins {side_phrase(groups, 'candidate')} but loses {side_phrase(groups, 'baseline')}{note}"
        return Verdict(kind="dead_end", reason=reason, revisit_on=declared, **common)
    if losses:
        return Verdict(
            kind="dead_end",
            reason=f"slower: loses {side_phrase(groups, 'baseline')}{ties}{note}",
            revisit_on=declared,
            **common,
        )
    return Verdict(kind="inconclusive", reason=noise_reason(levels, spec), revisit_on=declared, **common)


# --------------------------------------------------------------- adaptive repeats
def level_settled(c: LevelComparison, min_effect_pct: float) -> bool:
    """The interval lies inside the band [-m, m] or wholly outside it."""
    m = min_effect_pct
    return (c.ci_low_pct >= -m and c.ci_high_pct <= m) or c.ci_low_pct > m or c.ci_high_pct < -m


def loss_bound(c: LevelComparison) -> float:
    """The level's lower bound for the no-loss test (records made before it: the interval's)."""
    return c.loss_bound_pct if c.loss_bound_pct is not None else c.ci_low_pct


def _loss_not_ruled_out(c: LevelComparison, spec: VerdictSpec) -> bool:
    """A WIN needs every level shown not to lose more than m (bound >= -m), latency aside."""
    return loss_bound(c) < -spec.min_effect_pct and not c.limit_decided


def _worth_repeating(c: LevelComparison, spec: VerdictSpec, win_in_sight: bool) -> bool:
    """Futility rule: repeat an unsettled level only if, at repeats.max, the interval
    around today's estimate would change the level's winner - or, while some level
    wins, would rule a loss out.  The projected half-width is today's x sqrt(n / max)
    x the t quantile's shrink from today's df to the df at max (a small noise prior
    leaves few df, and their quantile is most of the width).  Proving an equivalence
    for its own sake is never pursued."""
    m, n, n_max = spec.min_effect_pct, min(c.n_baseline, c.n_candidate), spec.repeats.max
    if level_settled(c, m) or n >= n_max or c.limit_decided:
        return False
    if c.ci_low_pct <= -100 or c.ci_high_pct >= UNBOUNDED_PCT:
        return True  # nothing known yet: measure
    shrink = math.sqrt(n / n_max) * _t_shrink(c, n_max - n, c.level_confidence or spec.confidence)
    lo, hi = math.log1p(c.ci_low_pct / 100), math.log1p(c.ci_high_pct / 100)
    centre, half = (lo + hi) / 2, (hi - lo) / 2 * shrink
    p_lo, p_hi = math.expm1(centre - half) * 100, math.expm1(centre + half) * 100
    if level_winner(c.delta_pct, p_lo, p_hi, m) != level_winner(c.delta_pct, c.ci_low_pct, c.ci_high_pct, m):
        return True
    if not (win_in_sight and _loss_not_ruled_out(c, spec)):
        return False
    bound = loss_bound(c)
    if bound <= -100:
        return True
    from campaign.verdict.multiplicity import one_sided_confidence  # scipy, as in `compare_level`

    one_sided = one_sided_confidence(spec, n_max)
    b_half = (centre - math.log1p(bound / 100)) * math.sqrt(n / n_max) * _t_shrink(c, n_max - n, one_sided)
    return math.expm1(centre - b_half) * 100 >= -m  # max repeats could rule the loss out


def _t_shrink(c: LevelComparison, more: int, confidence: float) -> float:
    """quantile(df + more) / quantile(df): 1 where df is unknown (older records)."""
    if c.df is None or c.df <= 0 or more <= 0:
        return 1.0
    return quantile(confidence, c.df + more) / quantile(confidence, c.df)


def levels_needing_repeats(comparisons: Sequence[LevelComparison], spec: VerdictSpec) -> list[LevelComparison]:
    """Levels whose interval straddles a band edge and whose outcome repeats could change."""
    win_in_sight = any(c.winner == "candidate" for c in comparisons) and not any(
        c.winner == "baseline" for c in comparisons
    )
    return [c for c in comparisons if _worth_repeating(c, spec, win_in_sight)]


def workloads_needing_repeats(comparisons: Sequence[LevelComparison], spec: VerdictSpec) -> list[str]:
    """The workloads worth re-running (a settled workload need not be measured again)."""
    return list(dict.fromkeys(c.workload for c in levels_needing_repeats(comparisons, spec)))


def needs_more_repeats(
    comparisons_or_samples: Sequence[LevelComparison] | Sequence[LevelSamples],
    spec: VerdictSpec,
    repeats_done: int,
    *,
    paired: bool | None = None,
    noise_floor_pct: float | None = None,
    noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
    noise_by_workload: Mapping[str, tuple[float, int]] | None = None,
) -> bool:
    """Sequential rule.  fixed: exactly repeats.min repeats.  adaptive: at least
    repeats.min, at most repeats.max, and in between only while some level's interval
    straddles a band edge and repeats could still change its winner (`_worth_repeating`)."""
    if spec.policy == "fixed" or repeats_done < spec.repeats.min:
        return repeats_done < spec.repeats.min
    if repeats_done >= spec.repeats.max:
        return False
    items: list[Any] = list(comparisons_or_samples)
    if items and isinstance(items[0], LevelSamples):
        items = compare_levels(
            items,
            spec,
            paired=paired,
            noise_floor_pct=noise_floor_pct,
            noise_floor_df=noise_floor_df,
            noise_by_workload=noise_by_workload,
        )
    return bool(levels_needing_repeats(items, spec))
