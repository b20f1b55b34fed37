"""Statistics for the verdict: the relative effect of a candidate and its interval.

Throughput is multiplicative (a change makes a server x% faster), so intervals are
built on log values: the effect is delta% = (mean(candidate) / mean(baseline) - 1) * 100
and its interval is exp(log(ratio of means) +/- t * se) with se from

* paired repeats (interleaved baseline/candidate pairs): the per-pair log ratios,
  which cancel slow drift of the node (df = pairs - 1);
* otherwise Welch on the log values of each side (Welch-Satterthwaite df).

A prior noise floor (the pooled coefficient of variation of the baseline's repeats,
see `noise_floor`) is combined with the observed variance as `noise_floor_df` extra
degrees of freedom, which is what makes one or two repeats usable.  Without a prior a
single repeat gives an undetermined interval (-100%, +inf).  Samples containing a zero
(a level that produced nothing) fall back to a delta-method interval on raw values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

#: weight (degrees of freedom) given to a noise floor when no count is known.
DEFAULT_NOISE_FLOOR_DF = 8

Method = Literal["paired", "welch", "linear", "exact", "undetermined"]


class EffectInterval(BaseModel):
    """Relative effect of candidate over baseline, in percent, with its interval."""

    delta_pct: float
    low_pct: float
    high_pct: float
    n_baseline: int
    n_candidate: int
    method: Method
    df: float  # degrees of freedom of the t quantile (inf: known variance / exact)

    @property
    def determined(self) -> bool:
        return math.isfinite(self.low_pct) and math.isfinite(self.high_pct) and self.method != "undetermined"


class NoiseEstimate(BaseModel):
    pct: float  # pooled coefficient of variation, percent
    df: int  # degrees of freedom behind it


class DriftResult(BaseModel):
    """How far a re-measured baseline moved from the earlier one."""

    pct: float
    low_pct: float
    high_pct: float
    significant: bool


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of no samples")
    return math.fsum(xs) / len(xs)


def stdev(xs: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); 0.0 for fewer than two samples."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def quantile(confidence: float, df: float) -> float:
    """Two-sided critical value: Student t for finite df, normal for infinite."""
    from scipy import stats as _scipy_stats  # ~1 s to import: the journal reads rules, not quantiles

    p = 1.0 - (1.0 - confidence) / 2.0
    if math.isinf(df):
        return float(_scipy_stats.norm.ppf(p))
    return float(_scipy_stats.t.ppf(p, df))


def _check(name: str, xs: Sequence[float]) -> list[float]:
    out = [float(x) for x in xs]
    if not out:
        raise ValueError(f"{name}: no samples")
    if any(not math.isfinite(x) or x < 0 for x in out):
        raise ValueError(f"{name}: samples must be finite and non-negative, got {out}")
    return out


def _log_sigma(cv_pct: float) -> float:
    """Standard deviation on the log scale of a quantity with this coefficient of variation."""
    cv = cv_pct / 100.0
    return math.sqrt(math.log1p(cv * cv))


def _combine(own_var: float | None, own_df: int, prior_var: float | None, prior_df: int) -> tuple[float | None, float]:
    """Pool the observed variance with the prior's, weighted by degrees of freedom."""
    parts = [(v, d) for v, d in ((own_var, own_df), (prior_var, prior_df)) if v is not None and d > 0]
    total_df = sum(d for _, d in parts)
    if total_df == 0:
        return None, 0.0
    return sum(v * d for v, d in parts) / total_df, float(total_df)


def relative_effect(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    paired: bool = False,
    noise_floor_pct: float | None = None,
    noise_floor_df: int = DEFAULT_NOISE_FLOOR_DF,
) -> EffectInterval:
    """delta% of candidate over baseline with a `confidence` interval (see module doc).

    `paired` is honoured only when both sides have the same length; otherwise Welch."""
    b, c = _check("baseline", baseline), _check("candidate", candidate)
    nb, nc = len(b), len(c)
    mb, mc = mean(b), mean(c)

    def result(delta: float, lo: float, hi: float, method: Method, df: float) -> EffectInterval:
        return EffectInterval(
            delta_pct=delta, low_pct=lo, high_pct=hi, n_baseline=nb, n_candidate=nc, method=method, df=df
        )

    if mb == 0.0:
        if mc == 0.0:
            return result(0.0, 0.0, 0.0, "exact", math.inf)
        return result(math.inf, math.inf, math.inf, "exact", math.inf)
    delta = (mc / mb - 1.0) * 100.0
    if mc == 0.0:
        return result(-100.0, -100.0, -100.0, "exact", math.inf)
    prior_var = _log_sigma(noise_floor_pct) ** 2 if noise_floor_pct is not None else None
    prior_df = noise_floor_df if noise_floor_pct is not None else 0

    if any(x == 0.0 for x in b + c):
        return _linear(b, c, mb, mc, confidence, noise_floor_pct, prior_df, result)

    centre = math.log(mc / mb)
    method: Method
    if paired and nb == nc:
        ratios = [math.log(y / x) for x, y in zip(b, c)]
        own = stdev(ratios) ** 2 if nb >= 2 else None
        var, df = _combine(own, nb - 1, 2 * prior_var if prior_var is not None else None, prior_df)
        if var is None:
            return result(delta, -100.0, math.inf, "undetermined", 0.0)
        se, method = math.sqrt(var / nb), "paired"
    else:
        lb, lc = [math.log(x) for x in b], [math.log(x) for x in c]
        vb, dfb = _combine(stdev(lb) ** 2 if nb >= 2 else None, nb - 1, prior_var, prior_df)
        vc, dfc = _combine(stdev(lc) ** 2 if nc >= 2 else None, nc - 1, prior_var, prior_df)
        if vb is None and vc is None:
            return result(delta, -100.0, math.inf, "undetermined", 0.0)
        if vb is None or vc is None:  # one side has a single repeat: borrow the other's variance
            var, df = (vc, dfc) if vb is None else (vb, dfb)
            assert var is not None  # one of the two is set (checked above)
            se, method = math.sqrt(var * (1 / nb + 1 / nc)), "welch"
        else:
            ab, ac = vb / nb, vc / nc
            se = math.sqrt(ab + ac)
            df = (ab + ac) ** 2 / (ab * ab / dfb + ac * ac / dfc) if ab + ac > 0 else dfb + dfc
            if nb < 2 and nc < 2:  # both variances are the same prior: its df, not twice it
                df = float(prior_df)
            method = "welch"
    if se == 0.0:
        return result(delta, delta, delta, method, df)
    half = quantile(confidence, df) * se
    return result(delta, math.expm1(centre - half) * 100.0, math.expm1(centre + half) * 100.0, method, df)


def _linear(
    b: list[float],
    c: list[float],
    mb: float,
    mc: float,
    confidence: float,
    noise_floor_pct: float | None,
    prior_df: int,
    result: Callable[[float, float, float, Method, float], EffectInterval],
) -> EffectInterval:
    """Delta-method interval on raw values, for samples that contain a zero."""
    nb, nc = len(b), len(c)
    prior = (noise_floor_pct / 100.0) ** 2 if noise_floor_pct is not None else None
    cvb, dfb = _combine((stdev(b) / mb) ** 2 if nb >= 2 else None, nb - 1, prior, prior_df)
    cvc, dfc = _combine((stdev(c) / mc) ** 2 if nc >= 2 else None, nc - 1, prior, prior_df)
    ratio = mc / mb
    delta = (ratio - 1.0) * 100.0
    if cvb is None and cvc is None:
        return result(delta, -100.0, math.inf, "undetermined", 0.0)
    cvb = cvc if cvb is None else cvb
    cvc = cvb if cvc is None else cvc
    assert cvb is not None and cvc is not None  # one of the two is set (checked above)
    df = max(dfb, dfc) if dfb == 0 or dfc == 0 else min(dfb, dfc)
    se = ratio * math.sqrt(cvb / nb + cvc / nc)
    half = quantile(confidence, df) * se
    return result(delta, max(-100.0, (ratio - half - 1.0) * 100.0), (ratio + half - 1.0) * 100.0, "linear", df)


def noise_estimate(samples_by_level: Mapping[Any, Sequence[float]] | Iterable[Sequence[float]]) -> NoiseEstimate | None:
    """Pooled coefficient of variation of repeated measurements of the same thing.

    Each level contributes (n - 1) degrees of freedom; levels with one sample or a zero
    mean contribute nothing.  None when no level has two repeats."""
    groups = samples_by_level.values() if isinstance(samples_by_level, Mapping) else samples_by_level
    num, df = 0.0, 0
    for xs in groups:
        xs = [float(x) for x in xs]
        if len(xs) < 2 or mean(xs) <= 0:
            continue
        num += (len(xs) - 1) * (stdev(xs) / mean(xs)) ** 2
        df += len(xs) - 1
    if df == 0:
        return None
    return NoiseEstimate(pct=math.sqrt(num / df) * 100.0, df=df)


def noise_floor(samples_by_level: Mapping[object, Sequence[float]] | Iterable[Sequence[float]]) -> float:
    """Pooled coefficient of variation in percent (see `noise_estimate`).

    Raises ValueError when no level has at least two repeats: a noise floor of 0 would
    make single-repeat comparisons look certain."""
    est = noise_estimate(samples_by_level)
    if est is None:
        raise ValueError("noise floor needs at least one level with two or more repeats")
    return est.pct


def drift(
    before: Sequence[float], after: Sequence[float], noise_pct: float, *, confidence: float = 0.95
) -> DriftResult:
    """Did the baseline move between two measurements of it?

    Significant when the change exceeds the noise floor AND its interval (Welch on log
    values, the noise floor as prior) excludes zero."""
    eff = relative_effect(before, after, confidence=confidence, noise_floor_pct=noise_pct)
    excludes_zero = eff.low_pct > 0 or eff.high_pct < 0
    return DriftResult(
        pct=eff.delta_pct,
        low_pct=eff.low_pct,
        high_pct=eff.high_pct,
        significant=excludes_zero and abs(eff.delta_pct) > noise_pct,
    )
