"""Launches as the unit: the comparison of a candidate with the baseline when every
launch of a server draws its own speed offset, shared by all its levels.

Each side (candidate, baseline) of a workload is an R x L table of log figures, one row
per launch (`campaign.verdict.noise` has the model).  Per side, the variance components
(rows: L s_o^2 + s_e^2; residual: s_e^2) are the node's prior updated by the side's
own table: own and prior sums of squares, each over the prior's mean square, give a
ratio rho = (own ratio SS + k) / (own df + k) that scales the prior, with k = the
prior's df for the baseline (it is the node's config: full weight) and
`CANDIDATE_PRIOR_DF` for the candidate (another config may be noisier).  When a side's
own spread is far above the prior (F test, p < `OVERRULE_P`: a slow launch, a noisy
candidate) the prior is dropped for that side: its own spread alone, with its own df.

Per workload:
* the common effect is the difference of the sides' grand means, variance
  A_b / (R_b L) + A_c / (R_c L) (the launch offsets do not average out over levels);
* the levels differ when the level-by-side contrasts, whose variance is the jitter
  alone (the offsets cancel), fail an F test at `HETEROGENEITY_P`; then each level has
  its own interval (variance (A/L + E (L-1)/L) / R per side), else every level carries
  the common effect and its interval;
* df by Welch-Satterthwaite over the components.
Bonferroni over the tests that can declare a winner (one per homogeneous workload, one
per level elsewhere).  The no-loss bound of every level (the intersection-union half
of a WIN) is always the level's own one-sided bound at the playbook's confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _scipy_stats

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelComparison, LevelSamples, WorkloadEffect
from campaign.playbook.schema import VerdictSpec
from campaign.verdict.noise import (
    Component,
    NodeNoise,
    WorkloadNoise,
    decompose,
    log_table,
)
from campaign.verdict.stats import mean, quantile

__all__ = ["CANDIDATE_PRIOR_DF", "Analysis", "analyze"]

#: df the node's noise counts for in a candidate's variance (its own spread adds its own).
CANDIDATE_PRIOR_DF = 4
#: a side whose own spread exceeds the node's at this p-value does not use the node's.
OVERRULE_P = 0.01
#: the levels of a workload are taken to differ below this p-value.
HETEROGENEITY_P = 0.05


@dataclass
class _Side:
    logs: list[list[float]]
    rows: Component
    res: Component

    @property
    def r(self) -> int:
        return len(self.logs)

    @property
    def width(self) -> int:
        return len(self.logs[0])

    def col(self, j: int) -> float:
        return math.fsum(row[j] for row in self.logs) / self.r

    def grand(self) -> float:
        return math.fsum(math.fsum(row) for row in self.logs) / (self.r * self.width)


@dataclass
class _Var:
    a: float  # rows mean square: L s_o^2 + s_e^2
    e: float  # residual mean square: s_e^2 (0 for one level)
    df: float
    own: bool  # the prior was overruled (or absent)

    def level(self, width: int) -> float:
        return self.a / width + self.e * (width - 1) / width


@dataclass
class Analysis:
    comparisons: list[LevelComparison]
    effects: list[WorkloadEffect]


def _side(rows: list[list[float]]) -> _Side | None:
    logs = log_table(rows)
    if logs is None or not logs:
        return None
    r, e = decompose(logs)
    return _Side(logs, r, e)


def _variance(own: _Side, prior: WorkloadNoise | None, k_max: float | None, rounds: int) -> _Var | None:
    """The side's components (module doc), with df as if it had `rounds` launches."""
    width = own.width
    own_df_rows, own_df_res = rounds - 1, (rounds - 1) * (width - 1)
    if prior is not None and prior.usable and prior.levels == width:
        pa, pe = prior.rows.ms, prior.res.ms
        assert pa is not None
        use_res = pe is not None and pe > 0 and own.res.df > 0
        ratio_ss = own.rows.ss / pa + (own.res.ss / pe if use_res else 0.0)  # type: ignore[operator]
        now_df = own.rows.df + (own.res.df if use_res else 0)
        prior_df = prior.rows.df + (prior.res.df if use_res else 0)
        if pa > 0 and (now_df == 0 or _scipy_stats.f.sf(ratio_ss / now_df, now_df, prior_df) >= OVERRULE_P):
            k = prior_df if k_max is None else min(k_max, prior_df)
            rho = (ratio_ss + k) / (now_df + k)
            proj_df = own_df_rows + (own_df_res if use_res else 0)
            return _Var(a=rho * pa, e=rho * (pe or 0.0), df=proj_df + k, own=False)
    if own.rows.df == 0:
        return None
    a = own.rows.ss / own.rows.df
    e = own.res.ss / own.res.df if own.res.df > 0 else 0.0
    return _Var(a=a, e=e, df=float(own_df_rows), own=True)


def _satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    total = sum(v for v, _ in terms)
    denom = sum(v * v / d for v, d in terms if d > 0 and v > 0)
    return total * total / denom if denom > 0 else math.inf


@dataclass
class _Workload:
    name: str
    samples: list[LevelSamples]
    b: _Side
    c: _Side
    vb: _Var
    vc: _Var
    rb: int
    rc: int
    p_differ: float | None

    @property
    def homogeneous(self) -> bool:
        return self.p_differ is None or self.p_differ >= HETEROGENEITY_P

    def common(self) -> tuple[float, float, float]:
        """(centre, se, df) of the common effect on the log scale."""
        width = self.b.width
        tb, tc = self.vb.a / (self.rb * width), self.vc.a / (self.rc * width)
        return self.c.grand() - self.b.grand(), math.sqrt(tb + tc), _satterthwaite([(tb, self.vb.df), (tc, self.vc.df)])

    def level(self, j: int) -> tuple[float, float, float]:
        width = self.b.width
        tb, tc = self.vb.level(width) / self.rb, self.vc.level(width) / self.rc
        return self.c.col(j) - self.b.col(j), math.sqrt(tb + tc), _satterthwaite([(tb, self.vb.df), (tc, self.vc.df)])


def _heterogeneity(b: _Side, c: _Side, vb: _Var, vc: _Var) -> float | None:
    width = b.width
    if width < 2:
        return None
    jitter = vb.e / b.r + vc.e / c.r
    d = [c.col(j) - b.col(j) for j in range(width)]
    dm = math.fsum(d) / width
    q = math.fsum((x - dm) ** 2 for x in d)
    if jitter <= 0:
        return 0.0 if q > 0 else 1.0
    df2 = _satterthwaite([(vb.e / b.r, vb.df), (vc.e / c.r, vc.df)])
    return float(_scipy_stats.f.sf(q / (width - 1) / jitter, width - 1, min(df2, 1e6)))


def _prepare(name: str, samples: list[LevelSamples], metric: str, prior: WorkloadNoise | None,
             project_to: int | None) -> _Workload | None:
    rb = min(len(s.baseline) for s in samples)
    rc = min(len(s.candidate) for s in samples)
    if rb < 1 or rc < 1:
        return None
    b = _side([[float(getattr(s.baseline[i], metric)) for s in samples] for i in range(rb)])
    c = _side([[float(getattr(s.candidate[i], metric)) for s in samples] for i in range(rc)])
    if b is None or c is None:
        return None
    pb_, pc_ = (max(project_to, rb), max(project_to, rc)) if project_to else (rb, rc)
    vb = _variance(b, prior, None, pb_)
    vc = _variance(c, prior, CANDIDATE_PRIOR_DF, pc_)
    if vb is None and vc is None:
        return None
    vb = vb or _Var(vc.a, vc.e, vc.df, True)  # type: ignore[union-attr]
    vc = vc or _Var(vb.a, vb.e, vb.df, True)
    return _Workload(name, samples, b, c, vb, vc, pb_, pc_, _heterogeneity(b, c, vb, vc))


def _meets(results: Sequence[LevelResult], spec: VerdictSpec) -> bool | None:
    lim = spec.latency_limit
    if lim is None or not results:
        return None
    return mean([getattr(getattr(r, lim.metric), lim.stat) for r in results]) <= lim.max_ms


def _pct(x: float) -> float:
    return max(-100.0, min(1e6, math.expm1(x) * 100.0))


def analyze(samples: Sequence[LevelSamples], spec: VerdictSpec, noise: NodeNoise | None, *,
            project_to: int | None = None, shift_se: float = 0.0,
            homogeneous: dict[str, bool] | None = None) -> Analysis | None:
    """Every level's comparison (module doc).  `project_to`: as if each side had that
    many launches with the same estimates; `shift_se` moves every centre by that many
    of today's standard errors (the stopping rule's "could still decide");
    `homogeneous` fixes the heterogeneity decision (today's, when projecting).
    None when some workload cannot be analysed this way (a zero figure, one launch
    and no prior): `rule.compare_levels` falls back to its per-level intervals."""
    from campaign.verdict.rule import level_winner

    by_wl: dict[str, list[LevelSamples]] = {}
    for s in samples:
        by_wl.setdefault(s.workload, []).append(s)
    works: list[_Workload] = []
    for name, ss in by_wl.items():
        ss = sorted(ss, key=lambda s: s.concurrency)
        w = _prepare(name, ss, spec.metric, noise.get(name) if noise else None, project_to)
        if w is None:
            return None
        if homogeneous is not None and name in homogeneous:
            w.p_differ = None if homogeneous[name] else 0.0
        works.append(w)
    tests = sum(1 if w.homogeneous else w.b.width for w in works)
    conf = 1.0 - (1.0 - spec.confidence) / max(1, tests)
    one_sided = max(0.5, 1.0 - 2.0 * (1.0 - spec.confidence))
    now_se = {}
    if shift_se and project_to:
        base = analyze(samples, spec, noise, homogeneous={w.name: w.homogeneous for w in works})
        now_se = {(e.workload): e.se_log for e in (base.effects if base else [])}
    comparisons, effects = [], []
    m = spec.min_effect_pct
    for w in works:
        centre, se, df = w.common()
        shift = shift_se * now_se.get(w.name, se)
        centre += shift
        half = quantile(conf, df) * se
        effects.append(WorkloadEffect(
            workload=w.name, delta_pct=_pct(centre), low_pct=_pct(centre - half), high_pct=_pct(centre + half),
            se_log=se, df=df if math.isfinite(df) else None, levels_differ_p=w.p_differ,
            common=w.homogeneous, rounds_baseline=w.rb, rounds_candidate=w.rc,
            noise_pct=_pct(math.sqrt(w.vb.level(w.b.width))), candidate_noise_pct=_pct(math.sqrt(w.vc.level(w.b.width))),
            prior_overruled=w.vc.own and noise is not None and noise.get(w.name) is not None,
        ))
        for j, s in enumerate(w.samples):
            lc, lse, ldf = w.level(j)
            lc += shift
            bound = lc - quantile(one_sided, ldf) * lse
            if w.homogeneous:
                d, lo, hi, used_df = centre, centre - half, centre + half, df
            else:
                lhalf = quantile(conf, ldf) * lse
                d, lo, hi, used_df = lc, lc - lhalf, lc + lhalf, ldf
            winner = level_winner(_pct(d), _pct(lo), _pct(hi), m)
            b_ok, c_ok = _meets(s.baseline, spec), _meets(s.candidate, spec)
            if b_ok is not None and c_ok is not None and b_ok != c_ok:
                winner = "candidate" if c_ok else "baseline"
            comparisons.append(LevelComparison(
                workload=w.name, concurrency=s.concurrency, metric=spec.metric,
                baseline_mean=mean([float(getattr(r, spec.metric)) for r in s.baseline]),
                candidate_mean=mean([float(getattr(r, spec.metric)) for r in s.candidate]),
                delta_pct=_pct(d), ci_low_pct=_pct(lo), ci_high_pct=_pct(hi), loss_bound_pct=_pct(bound),
                df=used_df if math.isfinite(used_df) else None, level_confidence=conf,
                n_baseline=len(s.baseline), n_candidate=len(s.candidate), winner=winner,
                baseline_meets_limit=b_ok, candidate_meets_limit=c_ok, common=w.homogeneous,
            ))
    return Analysis(comparisons, effects)
