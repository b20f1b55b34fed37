"""Launches as the unit: the comparison of a candidate with the baseline when every
launch of a server draws its own speed offset, shared by all its levels.

Each side (candidate, baseline) of a workload is an R x L table of log figures, one row
per launch (`campaign.verdict.noise` has the model), screened for stalls first
(`campaign.verdict.screen`: a level or a launch that interference slowed far beyond the
noise is replaced by its prediction or dropped, on the node's scale).  Per side, the
variance components (rows: L s_o^2 + s_e^2; residual: s_e^2) are the node's prior
updated by the side's own table: own and prior sums of squares, each over the prior's
mean square, give a ratio rho = (own ratio SS + k) / (own df + k) that scales the
prior, with k = the prior's df for the baseline (it is the node's config: full weight)
and `CANDIDATE_PRIOR_DF` for the candidate (another config may be noisier), both capped
by the node's `prior_df` where its noise varies between experiments (a machine whose
load comes and goes: the experiment's own spread then counts for more).  When a side's
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
Multiplicity over the tests that can declare a winner: one per homogeneous workload, and
elsewhere each level with weight M_eff / L (Cheverud-Nyholt: levels sharing a launch
offset are correlated, so 8 levels are not 8 independent tests), by Holm's weighted
step-down (`_holm`): the first test is at the Bonferroni level over all of them, and
each decided test frees its share for the rest (a sweep that loses clearly at every
level leaves the family's whole level to the single stream).  All at Pocock's per-look
level when the policy looks after every round (`look_alpha`).
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
    prior_scale,
)
from campaign.verdict.screen import screen
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
    stalled_cells: int = 0
    stalled_launches: int = 0

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


def _side(rows: list[list[float]], prior: WorkloadNoise | None) -> _Side | None:
    """One side's table, screened for stalls (`campaign.verdict.screen`) on the node's
    scale; a replaced cell costs the residual one df."""
    logs = log_table(rows)
    if logs is None or not logs:
        return None
    sc = screen(logs, prior_scale(prior))
    r, e, cols = decompose_cols(sc.table)
    return _Side(sc.table, r, Component(ss=e.ss, df=max(0, e.df - sc.cells)), cols, sc.cells, sc.launches)


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
                  proj_df=(rounds - 1) + (max(0, (rounds - 1) * (width - 1) - own.stalled_cells) if use_res else 0))


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


def _sides(name: str, samples: list[LevelSamples], metric: str,
           prior: WorkloadNoise | None) -> tuple[_Side, _Side, int, int] | None:
    """Both sides' screened tables, and the rounds each side measured."""
    rb = min(len(s.baseline) for s in samples)
    rc = min(len(s.candidate) for s in samples)
    if rb < 1 or rc < 1:
        return None
    b = _side([[float(getattr(s.baseline[i], metric)) for s in samples] for i in range(rb)], prior)
    c = _side([[float(getattr(s.candidate[i], metric)) for s in samples] for i in range(rc)], prior)
    return None if b is None or c is None else (b, c, rb, rc)


def _prepare_all(by_wl: dict[str, list[LevelSamples]], metric: str, noise: NodeNoise | None,
                 project_to: int | None) -> list[_Workload] | None:
    """Every workload's sides and variances; None when one cannot be analysed."""
    prior = {name: noise.get(name) if noise else None for name in by_wl}
    sides = {}
    for name, ss in by_wl.items():
        got = _sides(name, ss, metric, prior[name])
        if got is None:
            return None
        sides[name] = got
    # launches each side holds after screening; a projection adds the rounds still to come
    rounds = {name: ((b.r + max(0, project_to - rb), c.r + max(0, project_to - rc)) if project_to else (b.r, c.r))
              for name, (b, c, rb, rc) in sides.items()}
    scales = []
    d0 = noise.prior_df if noise is not None else None  # the node's noise varies between experiments
    for side, cap in ((0, None), (1, float(CANDIDATE_PRIOR_DF))):
        k_max = min((x for x in (cap, d0) if x is not None), default=None)
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



@dataclass
class _Unit:
    """One test that can declare a winner: a homogeneous workload's common effect, or
    one level of a workload whose levels differ (log scale).  `weight`: its share of the
    multiplicity count (1; a level of a workload whose L levels share launch offsets
    counts M_eff / L, so its L levels count M_eff together); `conf`: the confidence its
    interval is drawn at (`_holm`)."""

    centre: float
    se: float
    df: float
    weight: float
    conf: float = 0.95


def _p_decisive(u: _Unit, m: float) -> float:
    """Two-sided p-value of "the effect lies beyond the band": the interval at 1 - p
    just touches +m (or -m).  1 inside the band."""
    if u.se <= 0:
        return 0.0 if abs(u.centre) > math.log1p(m / 100.0) else 1.0
    if u.centre > 0:
        stat = (u.centre - math.log1p(m / 100.0)) / u.se
    else:
        stat = (math.log1p(-m / 100.0) - u.centre) / u.se
    if stat <= 0:
        return 1.0
    return float(2.0 * _scipy_stats.t.sf(stat, min(u.df, 1e6)))


def _holm(units: dict[tuple[str, int | None], _Unit], alpha: float, m: float) -> None:
    """Holm's step-down over the units (Holm 1979), on the effective count: in order of
    p, a unit is decided when p <= alpha / (the weight of the units not yet decided);
    the first that is not stops the procedure, and it and the rest are drawn at that
    step's level.  The first step is the Bonferroni level over the effective number of
    tests; every decided unit frees its share, so one clear loss across a sweep does not
    make a smaller single-stream win pay for eight tests.  Sets each unit's `conf`."""
    order = sorted(units.values(), key=lambda u: _p_decisive(u, m))
    left = math.fsum(u.weight for u in order)
    for i, u in enumerate(order):
        level = alpha / max(left, 1.0)
        if _p_decisive(u, m) <= level:
            u.conf = 1.0 - level
            left -= u.weight
            continue
        for rest in order[i:]:
            rest.conf = 1.0 - level
        return


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
    one_sided = max(0.5, 1.0 - 2.0 * (1.0 - spec.confidence))
    now_se: dict[str, float] = {}
    level_se: dict[tuple[str, int], float] = {}
    if shift_se and project_to:
        today = _prepare_all(by_wl, spec.metric, noise, None) or []
        now_se = {t.name: t.common()[1] for t in today}
        level_se = {(t.name, s.concurrency): t.level(j)[1] for t in today for j, s in enumerate(t.samples)}
    m = spec.min_effect_pct
    # the units that can declare a winner, with the estimates they are tested on
    units: dict[tuple[str, int | None], _Unit] = {}
    for w in works:
        centre, se, df = w.common()
        centre += shift_se * now_se.get(w.name, se)
        if w.homogeneous:
            units[(w.name, None)] = _Unit(centre, se, df, 1.0)
            continue
        weight = w.effective_tests() / w.b.width
        for j, s in enumerate(w.samples):
            lc, lse, ldf = w.level(j)
            units[(w.name, s.concurrency)] = _Unit(lc + shift_se * level_se.get((w.name, s.concurrency), lse),
                                                   lse, ldf, weight)
    _holm(units, look_alpha(spec), m)
    comparisons, effects = [], []
    for w in works:
        centre, se, df = w.common()
        centre += shift_se * now_se.get(w.name, se)
        wconf = units[(w.name, None)].conf if w.homogeneous else max(
            units[(w.name, s.concurrency)].conf for s in w.samples)
        half = quantile(wconf, df) * se
        effects.append(WorkloadEffect(
            workload=w.name, delta_pct=_pct(centre), low_pct=_pct(centre - half), high_pct=_pct(centre + half),
            se_log=se, df=df if math.isfinite(df) else None, levels_differ_p=w.p_differ,
            common=w.homogeneous, rounds_baseline=w.rb, rounds_candidate=w.rc,
            noise_pct=_pct(math.sqrt(w.vb.level(w.b.width))), candidate_noise_pct=_pct(math.sqrt(w.vc.level(w.b.width))),
            prior_overruled=w.vc.own and noise is not None and noise.get(w.name) is not None,
            stalled_baseline=w.b.stalled_cells + w.b.stalled_launches,
            stalled_candidate=w.c.stalled_cells + w.c.stalled_launches,
        ))
        for s in w.samples:
            u = units[(w.name, None if w.homogeneous else s.concurrency)]
            half_u = quantile(u.conf, u.df) * u.se
            d, lo, hi, used_df, conf = u.centre, u.centre - half_u, u.centre + half_u, u.df, u.conf
            # the no-loss bound (intersection-union): the model's effect at this level
            bound = u.centre - quantile(one_sided, u.df) * u.se
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
