"""Launches as the unit: the comparison of a candidate with the baseline when every
launch of a server draws its own speed offset, shared by all its levels.

Each side (candidate, baseline) of a workload is an R x L table of log figures, one row
per launch (`campaign.verdict.noise` has the model), screened for stalls first
(`campaign.verdict.screen`: a level or a launch that interference slowed far beyond the
noise is replaced by its prediction or dropped, on the node's scale).  Per side, the
variance components are the node's prior updated by the side's own table
(`campaign.verdict.sides`).

Per workload:
* the common effect is the difference of the sides' grand means, variance
  A_b / (R_b L) + A_c / (R_c L) (the launch offsets do not average out over levels);
* the levels differ when the level-by-side contrasts, whose variance is the jitter
  alone (the offsets cancel), fail an F test at `HETEROGENEITY_P`; then each level has
  its own interval (variance (A/L + E (L-1)/L) / R per side), else every level carries
  the common effect and its interval;
* df by Welch-Satterthwaite over the components, each on the df it rests on
  (`sides.Var`): the rows mean square on launches (R - 1 per table, the node's and the
  side's), the jitter on launches x levels; the common effect's df are the rows' alone.
The no-loss bound of every level (the intersection-union half of a WIN) is the level's
one-sided bound at the playbook's confidence, spent over the looks as the win tests'
level is (`multiplicity.one_sided_confidence`: the adaptive policy re-tests it at every
look, and an unspent bound let a WIN that truly loses just beyond m through at twice
the oracle's rate): its own where the levels differ, the
common effect's where they do not (the model's effect at every level is then the
common one; a level losing on its own is what the heterogeneity test looks for).
Multiplicity over the tests that can declare a winner: one per homogeneous workload, and
elsewhere each level with weight M_eff / L (Cheverud-Nyholt: levels sharing a launch
offset are correlated, so 8 levels are not 8 independent tests; the common effects of
workloads run in the same launches count as fewer tests by the offset they share,
`_shared_launches`), by Holm's weighted
step-down: the first test is at the Bonferroni level over all of them, and each decided
test frees its share for the rest (a sweep that loses clearly at every level leaves the
family's whole level to the single stream).  All at this look's level when the policy
looks after every round (the error each look may spend: `campaign.verdict.multiplicity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy import stats as _scipy_stats

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelComparison, LevelSamples, WorkloadEffect
from campaign.playbook.schema import VerdictSpec
from campaign.verdict.baseline_level import low_workloads
from campaign.verdict.multiplicity import (
    Unit,
    effective_tests,
    holm,
    look_alpha,
    one_sided_confidence,
    shared_launch_factor,
)
from campaign.verdict.noise import (
    NodeNoise,
    WorkloadNoise,
)
from campaign.verdict.settings import SHIPPED, RuleSettings
from campaign.verdict.sides import (
    CANDIDATE_PRIOR_DF,
    Side,
    Var,
    own_ratio,
    pooled_scale,
    satterthwaite,
    side_table,
    variance,
)
from campaign.verdict.stats import mean, quantile

__all__ = ["Analysis", "analyze"]

#: the levels of a workload are taken to differ below this p-value.
HETEROGENEITY_P = 0.05


@dataclass
class Analysis:
    comparisons: list[LevelComparison]
    effects: list[WorkloadEffect]
    #: "workload (side)" where a side's two launches disagree like a stall on the node's
    #: scale (`screen`): the stopping rule measures a third.  The candidate's too since its
    #: screen weighs the node's scale by `CANDIDATE_PRIOR_DF` (`sides.side_table`): at the
    #: node's full df the third launch trimmed a noisy candidate's ordinary low launch and
    #: moved its mean up (the verdict lab: a null candidate twice as noisy as the node
    #: called a WIN so); now it is screened on its own spread, and a stalled candidate
    #: launch no longer ends the experiment inconclusive at two rounds (`heavy_tail`).
    undecided: list[str] = field(default_factory=list)
    #: workloads whose baseline launches all sit below the baseline's recent level far
    #: beyond the node's noise (`campaign.verdict.baseline_level`): the stopping rule
    #: measures on
    low_baseline: list[str] = field(default_factory=list)


@dataclass
class _Workload:
    name: str
    samples: list[LevelSamples]
    b: Side
    c: Side
    vb: Var
    vc: Var
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
        return (
            self.c.grand() - self.b.grand(),
            math.sqrt(tb + tc),
            satterthwaite([(tb, self.vb.df_a), (tc, self.vc.df_a)]),
        )

    def effective_tests(self) -> float:
        width = self.b.width
        offset = self.vb.offset(width) / self.rb + self.vc.offset(width) / self.rc
        return effective_tests(
            offset, [self.vb.level(width, j) / self.rb + self.vc.level(width, j) / self.rc for j in range(width)]
        )

    def level(self, j: int) -> tuple[float, float, float]:
        width = self.b.width
        tb, tc = self.vb.level(width, j) / self.rb, self.vc.level(width, j) / self.rc
        terms = [(v / self.rb, d) for v, d in self.vb.level_terms(width, j)] + [
            (v / self.rc, d) for v, d in self.vc.level_terms(width, j)
        ]
        return self.c.col(j) - self.b.col(j), math.sqrt(tb + tc), satterthwaite(terms)


def _heterogeneity(b: Side, c: Side, vb: Var, vc: Var) -> float | None:
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
    df2 = satterthwaite([(vb.e / b.r, vb.df_e), (vc.e / c.r, vc.df_e)])
    return float(_scipy_stats.f.sf(q / (width - 1), width - 1, min(df2, 1e6)))


def _sides(
    name: str,
    samples: list[LevelSamples],
    metric: str,
    prior: WorkloadNoise | None,
    prior_df: float | None,
    screened: bool,
) -> tuple[Side, Side, int, int] | None:
    """Both sides' screened tables, and the rounds each side measured."""
    rb = min(len(s.baseline) for s in samples)
    rc = min(len(s.candidate) for s in samples)
    if rb < 1 or rc < 1:
        return None
    b = side_table(
        [[float(getattr(s.baseline[i], metric)) for s in samples] for i in range(rb)],
        prior,
        prior_df,
        screened=screened,
    )
    c = side_table(
        [[float(getattr(s.candidate[i], metric)) for s in samples] for i in range(rc)],
        prior,
        prior_df,
        candidate=True,
        screened=screened,
    )
    return None if b is None or c is None else (b, c, rb, rc)


def _prepare_all(
    by_wl: dict[str, list[LevelSamples]],
    metric: str,
    noise: NodeNoise | None,
    project_to: int | None,
    settings: RuleSettings,
) -> list[_Workload] | None:
    """Every workload's sides and variances; None when one cannot be analysed."""
    prior = {name: noise.get(name) if noise else None for name in by_wl}
    sides = {}
    for name, ss in by_wl.items():
        got = _sides(
            name, ss, metric, prior[name], noise.prior_df if noise is not None else None, settings.stall_screen
        )
        if got is None:
            return None
        sides[name] = got
    # launches each side holds after screening; a projection adds the rounds still to come
    rounds = {
        name: ((b.r + max(0, project_to - rb), c.r + max(0, project_to - rc)) if project_to else (b.r, c.r))
        for name, (b, c, rb, rc) in sides.items()
    }
    scales = []
    d0 = noise.prior_df if noise is not None else None  # the node's noise varies between experiments
    for side, cap in ((0, None), (1, float(CANDIDATE_PRIOR_DF))):
        k_max = min((x for x in (cap, d0) if x is not None), default=None)
        ratios = [
            r
            for name, sd in sides.items()
            if (r := own_ratio(sd[1] if side else sd[0], prior[name], rounds[name][side])) is not None
        ]
        scales.append(pooled_scale(ratios, k_max) if ratios else None)
    out = []
    for name, (b, c, _, _) in sides.items():
        pb_, pc_ = rounds[name]
        vb = variance(b, prior[name], scales[0], pb_)
        vc = variance(c, prior[name], scales[1], pc_)
        if vb is None and vc is None:
            return None
        vb = vb or Var(vc.a, vc.e, vc.df_a, vc.df_e, True, vc.e_cols)  # type: ignore[union-attr]
        vc = vc or Var(vb.a, vb.e, vb.df_a, vb.df_e, True, vb.e_cols)
        out.append(
            _Workload(
                name,
                by_wl[name],
                b,
                c,
                vb,
                vc,
                pb_,
                pc_,
                _heterogeneity(b, c, vb, vc) if settings.common_effect else 0.0,
            )
        )
    return out


def _shared_launches(
    works: list[_Workload], units: dict[tuple[str, int | None], Unit], noise: NodeNoise | None
) -> None:
    """Shrink the multiplicity weights of the homogeneous workloads' common effects by
    what their shared launch offsets make them share (`multiplicity.shared_launch_factor`,
    the node's correlation from `campaign.verdict.shared_offsets`): both sides of every
    round measure each workload in the same launch, so those estimates move together.
    The levels of a workload whose levels differ keep their weights: each is mostly its
    own jitter, which no other test shares (the lab measured this version only)."""
    common = [w for w in works if w.homogeneous]
    if noise is None or len(common) < 2:
        return

    def cov(p: _Workload, q: _Workload) -> float:
        if p is q:
            return units[(p.name, None)].se ** 2
        r = noise.shared_offset(p.name, q.name)
        ob = math.sqrt(p.vb.offset(p.b.width) * q.vb.offset(q.b.width)) / max(p.rb, q.rb)
        oc = math.sqrt(p.vc.offset(p.b.width) * q.vc.offset(q.b.width)) / max(p.rc, q.rc)
        return r * (ob + oc)

    factor = shared_launch_factor([[cov(p, q) for q in common] for p in common])
    for w in common:
        units[(w.name, None)].weight *= factor


def _meets(results: Sequence[LevelResult], spec: VerdictSpec) -> bool | None:
    lim = spec.latency_limit
    if lim is None or not results:
        return None
    return mean([getattr(getattr(r, lim.metric), lim.stat) for r in results]) <= lim.max_ms


def _pct(x: float) -> float:
    # a bound at 1 df and a corrected level can lie thousands of log units out
    return max(-100.0, min(1e6, math.expm1(min(x, 20.0)) * 100.0))


def analyze(
    samples: Sequence[LevelSamples],
    spec: VerdictSpec,
    noise: NodeNoise | None,
    *,
    project_to: int | None = None,
    shift_se: float = 0.0,
    homogeneous: dict[str, bool] | None = None,
    settings: RuleSettings = SHIPPED,
) -> Analysis | None:
    """Every level's comparison (module doc).  `project_to`: as if each side had that
    many launches with the same estimates; `shift_se` moves every centre by that many
    of today's standard errors (the stopping rule's "could still decide");
    `homogeneous` fixes the heterogeneity decision (today's, when projecting);
    `settings`: the components used (`campaign.verdict.settings`).
    None when some workload cannot be analysed this way (a zero figure, one launch
    and no prior): `rule.compare_levels` falls back to its per-level intervals."""
    from campaign.verdict.rule import level_winner

    by_wl: dict[str, list[LevelSamples]] = {}
    for s in samples:
        by_wl.setdefault(s.workload, []).append(s)
    by_wl = {name: sorted(ss, key=lambda s: s.concurrency) for name, ss in by_wl.items()}
    works = _prepare_all(by_wl, spec.metric, noise, project_to, settings)
    if works is None:
        return None
    for w in works:
        if homogeneous is not None and w.name in homogeneous:
            w.p_differ = None if homogeneous[w.name] else 0.0
    now_se: dict[str, float] = {}
    level_se: dict[tuple[str, int], float] = {}
    if shift_se and project_to:
        today = _prepare_all(by_wl, spec.metric, noise, None, settings) or []
        now_se = {t.name: t.common()[1] for t in today}
        level_se = {(t.name, s.concurrency): t.level(j)[1] for t in today for j, s in enumerate(t.samples)}
    m = spec.min_effect_pct
    # the units that can declare a winner, with the estimates they are tested on
    units: dict[tuple[str, int | None], Unit] = {}
    for w in works:
        centre, se, df = w.common()
        centre += shift_se * now_se.get(w.name, se)
        if w.homogeneous:
            units[(w.name, None)] = Unit(centre, se, df, 1.0)
            continue
        weight = w.effective_tests() / w.b.width if settings.cheverud_nyholt else 1.0
        for j, s in enumerate(w.samples):
            lc, lse, ldf = w.level(j)
            units[(w.name, s.concurrency)] = Unit(
                lc + shift_se * level_se.get((w.name, s.concurrency), lse), lse, ldf, weight
            )
    if settings.cheverud_nyholt:
        _shared_launches(works, units, noise)
    look = project_to or max(len(s.candidate) for s in samples)
    holm(units, look_alpha(spec, look) if settings.spending else 1.0 - spec.confidence, m, step_down=settings.holm)
    one_sided = one_sided_confidence(spec, look if settings.spending else None)
    comparisons, effects = [], []
    for w in works:
        centre, se, df = w.common()
        centre += shift_se * now_se.get(w.name, se)
        wconf = (
            units[(w.name, None)].conf if w.homogeneous else max(units[(w.name, s.concurrency)].conf for s in w.samples)
        )
        half = quantile(wconf, df) * se
        effects.append(
            WorkloadEffect(
                workload=w.name,
                delta_pct=_pct(centre),
                low_pct=_pct(centre - half),
                high_pct=_pct(centre + half),
                se_log=se,
                df=df if math.isfinite(df) else None,
                levels_differ_p=w.p_differ,
                common=w.homogeneous,
                rounds_baseline=w.rb,
                rounds_candidate=w.rc,
                noise_pct=_pct(math.sqrt(w.vb.level(w.b.width))),
                candidate_noise_pct=_pct(math.sqrt(w.vc.level(w.b.width))),
                prior_overruled=w.vc.own and noise is not None and noise.get(w.name) is not None,
                stalled_baseline=w.b.stalled_cells + w.b.stalled_launches,
                stalled_candidate=w.c.stalled_cells + w.c.stalled_launches,
            )
        )
        for j, s in enumerate(w.samples):
            u = units[(w.name, None if w.homogeneous else s.concurrency)]
            half_u = quantile(u.conf, u.df) * u.se
            d, lo, hi, used_df, conf = u.centre, u.centre - half_u, u.centre + half_u, u.df, u.conf
            # the no-loss bound (intersection-union): the model's effect at this level
            bound = u.centre - quantile(one_sided, u.df) * u.se
            winner = level_winner(_pct(d), _pct(lo), _pct(hi), m)
            b_ok, c_ok = _meets(s.baseline, spec), _meets(s.candidate, spec)
            if b_ok is not None and c_ok is not None and b_ok != c_ok:
                winner = "candidate" if c_ok else "baseline"
            comparisons.append(
                LevelComparison(
                    workload=w.name,
                    concurrency=s.concurrency,
                    metric=spec.metric,
                    # the figures compared: each side's launches as screened (a stalled launch
                    # left out, a stalled level replaced by its prediction), on the log scale
                    baseline_mean=math.exp(w.b.col(j)),
                    candidate_mean=math.exp(w.c.col(j)),
                    delta_pct=_pct(d),
                    ci_low_pct=_pct(lo),
                    ci_high_pct=_pct(hi),
                    loss_bound_pct=_pct(bound),
                    df=used_df if math.isfinite(used_df) else None,
                    level_confidence=conf,
                    n_baseline=len(s.baseline),
                    n_candidate=len(s.candidate),
                    winner=winner,
                    baseline_meets_limit=b_ok,
                    candidate_meets_limit=c_ok,
                    common=w.homogeneous,
                )
            )
    low = (
        low_workloads({w.name: w.b.logs for w in works}, noise.level, noise)
        if noise and noise.level and project_to is None and settings.baseline_level
        else []
    )
    return Analysis(
        comparisons,
        effects,
        [f"{w.name} ({side})" for w in works for side, sd in (("baseline", w.b), ("candidate", w.c)) if sd.undecided],
        low,
    )
