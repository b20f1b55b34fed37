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
candidate) the prior's weight is dropped for that side (k = 0): the node's shape of the
noise scaled by the side's own ratio, with the side's own df.

Per workload:
* the common effect is the difference of the sides' grand means, variance
  A_b / (R_b L) + A_c / (R_c L) (the launch offsets do not average out over levels);
* the levels differ when the level-by-side contrasts, whose variance is the jitter
  alone (the offsets cancel), fail an F test at `HETEROGENEITY_P`; then each level has
  its own interval (variance (A/L + E (L-1)/L) / R per side), else every level carries
  the common effect and its interval;
* df by Welch-Satterthwaite over the components.
The no-loss bound of every level (the intersection-union half of a WIN) is the level's
one-sided bound at the playbook's confidence: its own where the levels differ, the
common effect's where they do not (the model's effect at every level is then the
common one; a level losing on its own is what the heterogeneity test looks for).
Bonferroni over the tests that can declare a winner: one per homogeneous workload, and
elsewhere the effective number of the levels' tests (Cheverud-Nyholt: levels sharing a
launch offset are correlated, so 8 levels are not 8 independent tests), at Pocock's
per-look level when the policy looks after every round (`look_alpha`).
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
    decompose_cols,
    level_jitter,
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
    cols: list[float]

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
    a: float  # rows mean square: L s_o^2 + mean s_e^2
    e: float  # residual mean square: mean s_e^2 (0 for one level)
    df: float
    own: bool  # the prior was overruled (or absent)
    e_cols: list[float]  # each level's jitter variance s_e,l^2

    def offset(self, width: int) -> float:
        return max(0.0, (self.a - self.e) / width)

    def level(self, width: int, j: int | None = None) -> float:
        """One launch's variance at level j (offset + that level's jitter); j None: the mean level."""
        if width == 1:
            return self.a
        return self.offset(width) + (self.e if j is None else self.e_cols[j])


@dataclass
class Analysis:
    comparisons: list[LevelComparison]
    effects: list[WorkloadEffect]


def _side(rows: list[list[float]]) -> _Side | None:
    logs = log_table(rows)
    if logs is None or not logs:
        return None
    r, e, cols = decompose_cols(logs)
    return _Side(logs, r, e, cols)


@dataclass
class _Ratio:
    """A side's own sums of squares over the node's mean squares, for one workload."""

    ss: float
    now_df: int
    prior_df: int
    proj_df: int  # own df with `rounds` launches


def _ratio(own: _Side, prior: WorkloadNoise | None, rounds: int) -> _Ratio | None:
    width = own.width
    if prior is None or not prior.usable or prior.levels != width or not prior.rows.ms:
        return None
    pa, pe = prior.rows.ms, prior.res.ms
    use_res = pe is not None and pe > 0 and own.res.df > 0
    return _Ratio(ss=own.rows.ss / pa + (own.res.ss / pe if use_res else 0.0),  # type: ignore[operator]
                  now_df=own.rows.df + (own.res.df if use_res else 0),
                  prior_df=prior.rows.df + (prior.res.df if use_res else 0),
                  proj_df=(rounds - 1) + ((rounds - 1) * (width - 1) if use_res else 0))


def _scale(ratios: Sequence[_Ratio], k_max: float | None) -> tuple[float, float, bool]:
    """(rho, k, overruled) for one side, pooled over its workloads: a config's launches
    are noisier or not on every workload they run."""
    ss, now = math.fsum(r.ss for r in ratios), sum(r.now_df for r in ratios)
    prior = max(r.prior_df for r in ratios)
    overruled = now > 0 and _scipy_stats.f.sf(ss / now, now, prior) < OVERRULE_P
    k = 0.0 if overruled else float(prior if k_max is None else min(k_max, prior))
    return (ss + k) / (now + k) if now + k > 0 else 1.0, k, overruled


def _variance(own: _Side, prior: WorkloadNoise | None, scale: tuple[float, float, bool] | None,
              rounds: int) -> _Var | None:
    """The side's components (module doc), with df as if it had `rounds` launches."""
    width = own.width
    r = _ratio(own, prior, rounds)
    if r is not None and scale is not None and prior is not None:
        rho, k, overruled = scale
        pa, pe = prior.rows.ms or 0.0, prior.res.ms or 0.0
        return _Var(a=rho * pa, e=rho * pe, df=r.proj_df + min(k, r.prior_df), own=overruled,
                    e_cols=[rho * x for x in prior.jitter()])
    if own.rows.df == 0:
        return None
    a = own.rows.ss / own.rows.df
    e = own.res.ss / own.res.df if own.res.df > 0 else 0.0
    e_cols = level_jitter(own.cols, own.res.df) if own.res.df > 0 else [0.0] * width
    return _Var(a=a, e=e, df=float(rounds - 1), own=True, e_cols=e_cols)


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

    def effective_tests(self) -> float:
        width = self.b.width
        offset = self.vb.offset(width) / self.rb + self.vc.offset(width) / self.rc
        return _effective_tests(offset, [self.vb.level(width, j) / self.rb + self.vc.level(width, j) / self.rc
                                         for j in range(width)])

    def level(self, j: int) -> tuple[float, float, float]:
        width = self.b.width
        tb, tc = self.vb.level(width, j) / self.rb, self.vc.level(width, j) / self.rc
        return self.c.col(j) - self.b.col(j), math.sqrt(tb + tc), _satterthwaite([(tb, self.vb.df), (tc, self.vc.df)])


#: Pocock's nominal level per look for an overall 0.05 over K equally spaced looks.
_POCOCK_05 = {1: 0.05, 2: 0.0294, 3: 0.0221, 4: 0.0182, 5: 0.0158, 6: 0.0142, 7: 0.0130, 8: 0.0120}


def look_alpha(spec: VerdictSpec) -> float:
    """The family error rate each look may spend: the adaptive policy looks after every
    round from repeats.min to repeats.max and stops at the first decisive one, so each
    look uses Pocock's nominal level (scaled to the playbook's 1 - confidence); the
    fixed policy looks once."""
    alpha = 1.0 - spec.confidence
    looks = 1 if spec.policy == "fixed" else spec.repeats.max - spec.repeats.min + 1
    return alpha * _POCOCK_05.get(looks, 0.0120 * 8 / looks) / 0.05


def _effective_tests(offset: float, level_vars: Sequence[float]) -> float:
    """Cheverud-Nyholt: levels that share a launch offset are correlated tests,
    M_eff = 1 + (L - 1)(1 - mean pairwise correlation^2)."""
    width = len(level_vars)
    if width < 2:
        return 1.0
    cors = [offset / math.sqrt(level_vars[i] * level_vars[j]) for i in range(width) for j in range(i + 1, width)
            if level_vars[i] > 0 and level_vars[j] > 0]
    rho = min(1.0, math.fsum(cors) / len(cors)) if cors else 0.0
    return 1.0 + (width - 1) * (1.0 - rho * rho)


def _heterogeneity(b: _Side, c: _Side, vb: _Var, vc: _Var) -> float | None:
    """p-value of "the levels' effects differ": Cochran's Q over the level-by-side
    contrasts, each weighted by its own jitter (the launch offsets cancel in them)."""
    width = b.width
    if width < 2:
        return None
    v = [vb.e_cols[j] / b.r + vc.e_cols[j] / c.r for j in range(width)]
    if any(x <= 0 for x in v):
        return 1.0
    w = [1.0 / x for x in v]
    d = [c.col(j) - b.col(j) for j in range(width)]
    dm = math.fsum(wi * di for wi, di in zip(w, d)) / math.fsum(w)
    q = math.fsum(wi * (di - dm) ** 2 for wi, di in zip(w, d))
    df2 = _satterthwaite([(vb.e / b.r, vb.df), (vc.e / c.r, vc.df)])
    return float(_scipy_stats.f.sf(q / (width - 1), width - 1, min(df2, 1e6)))


def _sides(name: str, samples: list[LevelSamples], metric: str) -> tuple[_Side, _Side, int, int] | None:
    rb = min(len(s.baseline) for s in samples)
    rc = min(len(s.candidate) for s in samples)
    if rb < 1 or rc < 1:
        return None
    b = _side([[float(getattr(s.baseline[i], metric)) for s in samples] for i in range(rb)])
    c = _side([[float(getattr(s.candidate[i], metric)) for s in samples] for i in range(rc)])
    return None if b is None or c is None else (b, c, rb, rc)


def _prepare_all(by_wl: dict[str, list[LevelSamples]], metric: str, noise: NodeNoise | None,
                 project_to: int | None) -> list[_Workload] | None:
    """Every workload's sides and variances; None when one cannot be analysed."""
    sides = {}
    for name, ss in by_wl.items():
        got = _sides(name, ss, metric)
        if got is None:
            return None
        sides[name] = got
    prior = {name: noise.get(name) if noise else None for name in sides}
    rounds = {name: ((max(project_to, rb), max(project_to, rc)) if project_to else (rb, rc))
              for name, (_, _, rb, rc) in sides.items()}
    scales = []
    for side, k_max in ((0, None), (1, float(CANDIDATE_PRIOR_DF))):
        ratios = [r for name, sd in sides.items()
                  if (r := _ratio(sd[1] if side else sd[0], prior[name], rounds[name][side])) is not None]
        scales.append(_scale(ratios, k_max) if ratios else None)
    out = []
    for name, (b, c, _, _) in sides.items():
        pb_, pc_ = rounds[name]
        vb = _variance(b, prior[name], scales[0], pb_)
        vc = _variance(c, prior[name], scales[1], pc_)
        if vb is None and vc is None:
            return None
        vb = vb or _Var(vc.a, vc.e, vc.df, True, vc.e_cols)  # type: ignore[union-attr]
        vc = vc or _Var(vb.a, vb.e, vb.df, True, vb.e_cols)
        out.append(_Workload(name, by_wl[name], b, c, vb, vc, pb_, pc_, _heterogeneity(b, c, vb, vc)))
    return out


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
    by_wl = {name: sorted(ss, key=lambda s: s.concurrency) for name, ss in by_wl.items()}
    works = _prepare_all(by_wl, spec.metric, noise, project_to)
    if works is None:
        return None
    for w in works:
        if homogeneous is not None and w.name in homogeneous:
            w.p_differ = None if homogeneous[w.name] else 0.0
    tests = sum(1.0 if w.homogeneous else w.effective_tests() for w in works)
    conf = 1.0 - look_alpha(spec) / max(1.0, tests)
    one_sided = max(0.5, 1.0 - 2.0 * (1.0 - spec.confidence))
    now_se: dict[str, float] = {}
    level_se: dict[tuple[str, int], float] = {}
    if shift_se and project_to:
        today = _prepare_all(by_wl, spec.metric, noise, None) or []
        now_se = {t.name: t.common()[1] for t in today}
        level_se = {(t.name, s.concurrency): t.level(j)[1] for t in today for j, s in enumerate(t.samples)}
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
            lc += shift_se * level_se.get((w.name, s.concurrency), lse) if not w.homogeneous else shift
            bound = lc - quantile(one_sided, ldf) * lse
            if w.homogeneous:  # the model's effect at this level is the common one
                bound = centre - quantile(one_sided, df) * se
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
