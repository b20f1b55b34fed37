"""One side of a comparison (candidate or baseline, one workload): its launch table,
screened for stalls (the node's scale weighed as in the variance below), and its
variance components with the node's noise as the prior.

Per side, the components (rows: L s_o^2 + s_e^2; residual: s_e^2) are the node's prior
updated by the side's own table: own and prior sums of squares, each over the prior's
mean square, give a ratio rho = (own ratio SS + k) / (own df + k) that scales the prior,
with k = the prior's df for the baseline (it is the node's config: full weight) and
`CANDIDATE_PRIOR_DF` for the candidate (another config may be noisier), both capped by the
node's `prior_df` where its noise varies between experiments.  When a side's own spread
is far above the prior (F test, p < `OVERRULE_P`: a slow launch, a noisy candidate) the
prior's weight is dropped for that side (k = 0).  One ratio scales both components (a
noisier config is noisier in its offsets and its jitter alike), but each keeps its own
df (`Var`): the rows' rest on launches (the node's, through the scaled estimate, and the
side's own R - 1, averaged in `variance`), the residual's on launches x levels.  `campaign.verdict.launches` compares two sides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _scipy_stats

from campaign.verdict.components import Component, decompose_cols, level_jitter, log_table
from campaign.verdict.noise import WorkloadNoise, prior_scale
from campaign.verdict.screen import Scale, pair_disagrees, screen

__all__ = [
    "CANDIDATE_PRIOR_DF",
    "OVERRULE_P",
    "Pooled",
    "Ratio",
    "Side",
    "Var",
    "own_ratio",
    "pooled_scale",
    "satterthwaite",
    "side_table",
    "variance",
]

#: df the node's noise counts for in a candidate's variance (its own spread adds its own).
CANDIDATE_PRIOR_DF = 4
#: a side whose own spread exceeds the node's at this p-value does not use the node's.
OVERRULE_P = 0.01


@dataclass
class Side:
    logs: list[list[float]]
    rows: Component
    res: Component
    cols: list[float]
    stalled_cells: int = 0
    stalled_launches: int = 0
    undecided: bool = False  # two launches that disagree like a stall (`screen`)

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
class Var:
    """A side's variance components, each with the df it rests on: the rows mean square
    only on launches (the node's and the side's own: R - 1 per table), the residual on
    launches x levels.  One df for both let a workload of 8 levels borrow the residual's
    df (7 per launch) for its common effect, whose variance is the rows': with the start
    baseline's 2 launches as the prior, the first experiment's 95% interval of a null
    candidate missed 0 in 15% of the draws (the verdict lab's generator, `bench.lab_engine`)."""

    a: float  # rows mean square: L s_o^2 + mean s_e^2
    e: float  # residual mean square: mean s_e^2 (0 for one level)
    df_a: float  # the df `a` rests on
    df_e: float  # the df `e` (and `e_cols`) rest on
    own: bool  # the prior was overruled (or absent)
    e_cols: list[float]  # each level's jitter variance s_e,l^2

    def offset(self, width: int) -> float:
        return max(0.0, (self.a - self.e) / width)

    def level(self, width: int, j: int | None = None) -> float:
        """One launch's variance at level j (offset + that level's jitter); j None: the mean level."""
        if width == 1:
            return self.a
        return self.offset(width) + (self.e if j is None else self.e_cols[j])

    def level_terms(self, width: int, j: int) -> list[tuple[float, float]]:
        """`level(width, j)` as (variance, df) terms for Welch-Satterthwaite: a / L on the
        rows' df, the rest (the level's jitter beyond its share in a) on the residual's."""
        if width == 1:
            return [(self.a, self.df_a)]
        total = self.level(width, j)
        rows = min(total, self.a / width)
        return [(rows, self.df_a), (total - rows, self.df_e)]


def side_table(
    rows: list[list[float]],
    prior: WorkloadNoise | None,
    prior_df: float | None = None,
    candidate: bool = False,
    screened: bool = True,
) -> Side | None:
    """One side's table, screened for stalls (`campaign.verdict.screen`) on the node's
    scale; a replaced cell costs the residual one df.  `prior_df`: what the node's noise
    is worth to one experiment where it moves between experiments (`NodeNoise.prior_df`);
    the launch tests weigh the node's launch spread by it, as the variance does.  Weighed
    by the history's full df, their cut was too tight on such a node: the verdict lab's
    `jitter` structure had a baseline launch dropped as a stall that was its ordinary
    offset, and a null level called a 13% loss.  The cell test keeps the full df: the
    stalls it exists for are single cells 20-65% low (the simulated node on a busy
    machine), which also make the node's noise move, and at the moderated df its cut
    would let the smaller ones through.

    `candidate`: the node's scale is the baseline config's; for another config it counts
    for `CANDIDATE_PRIOR_DF` in both tests, as in the candidate's variance, so a candidate
    noisier than the node is screened on its own spread.  At the node's full df the cell
    test replaced an ordinary low cell in about one in three two-launch tables of a
    candidate twice as noisy as the node, moving that level up by half the cell's miss:
    in the verdict lab's `noisy_candidate` such a level alone called a null candidate a
    WIN at C=250 (12 wrong verdicts of 2,000; 5 with this weight).  At two launches the
    candidate's own table cannot say which cell is off, so its cut rests on the prior's
    4 df: on a node whose levels jitter by 0.5% a cell 15% low is still replaced (10% low:
    two times in three); a smaller miss stays and widens the candidate's interval until
    a third launch screens it.  Likewise a launch: at three launches a candidate twice as
    noisy as the node lost an ordinary low launch in 7% of its tables at the node's df,
    in none at 4 (a launch 8% slow on a node whose launches scatter by 1% is dropped at
    three launches one time in three, at four two times in three; 15% slow always).
    Whether a candidate's two launches disagree like a stall is still judged on the
    node's scale: such a pair gets a third launch (`Analysis.undecided`).  `screened`
    False: none of this (`RuleSettings.stall_screen`)."""
    logs = log_table(rows)
    if logs is None or not logs:
        return None
    scale = prior_scale(prior)
    if scale is not None and prior_df is not None:  # the node's noise moves: its launch spread is worth fewer df
        scale = Scale(scale.jitter, scale.launch, scale.jitter_df, min(scale.launch_df, prior_df))
    node_scale = scale
    if scale is not None and candidate:  # another config: the node's scale is a prior, not its scale
        scale = Scale(
            scale.jitter,
            scale.launch,
            min(scale.jitter_df, CANDIDATE_PRIOR_DF),
            min(scale.launch_df, CANDIDATE_PRIOR_DF),
        )
    sc = screen(logs, scale, on=screened)
    if candidate and screened:  # a pair far apart on the node's scale: a stall or a noisy config, more launches tell
        sc.undecided = len(sc.table) == 2 and pair_disagrees(sc.table, node_scale)
    r, e, cols = decompose_cols(sc.table)
    return Side(sc.table, r, Component(ss=e.ss, df=max(0, e.df - sc.cells)), cols, sc.cells, sc.launches, sc.undecided)


@dataclass
class Ratio:
    """A side's own sums of squares over the node's mean squares, for one workload."""

    ss: float
    now_df: int
    prior_df: int
    proj_df: int  # own df with `rounds` launches


def own_ratio(own: Side, prior: WorkloadNoise | None, rounds: int) -> Ratio | None:
    width = own.width
    if prior is None or not prior.usable or prior.levels != width or not prior.rows.ms:
        return None
    pa, pe = prior.rows.ms, prior.res.ms
    use_res = pe is not None and pe > 0 and own.res.df > 0
    return Ratio(
        ss=own.rows.ss / pa + (own.res.ss / pe if use_res else 0.0),  # type: ignore[operator]
        now_df=own.rows.df + (own.res.df if use_res else 0),
        prior_df=prior.rows.df + (prior.res.df if use_res else 0),
        proj_df=(rounds - 1) + (max(0, (rounds - 1) * (width - 1) - own.stalled_cells) if use_res else 0),
    )


@dataclass
class Pooled:
    """One side's ratios pooled over its workloads (`pooled_scale`): a config's launches
    are noisier or not on every workload they run."""

    ss: float  # own sums of squares over the node's mean squares
    now: int  # their df
    proj: int  # their df with the rounds projected
    k: float  # the prior's weight (0: overruled)
    overruled: bool

    def rho(self, less_ss: float = 0.0, less_df: int = 0) -> float:
        """The scale of the node's noise for this side; `less_*`: without those sums."""
        n = self.now - less_df + self.k
        return (self.ss - less_ss + self.k) / n if n > 0 else 1.0


def pooled_scale(ratios: Sequence[Ratio], k_max: float | None) -> Pooled:
    ss, now = math.fsum(r.ss for r in ratios), sum(r.now_df for r in ratios)
    prior = max(r.prior_df for r in ratios)
    overruled = now > 0 and _scipy_stats.f.sf(ss / now, now, prior) < OVERRULE_P
    k = 0.0 if overruled else float(prior if k_max is None else min(k_max, prior))
    return Pooled(ss, now, sum(r.proj_df for r in ratios), k, overruled)


def variance(own: Side, prior: WorkloadNoise | None, scale: Pooled | None, rounds: int) -> Var | None:
    """The side's components (module doc), with df as if it had `rounds` launches.

    The rows mean square a has two estimates: the node's pa scaled by rho without this
    workload's own rows (the side's other evidence: its residual, its other workloads,
    the prior), and the side's own rows (R - 1 df).  The first rests on pa's df (the
    node's launches: the start baseline's 2 give 1) and on rho's: its df are
    1 / (m / (m + k)^2 + 1 / dpa), m the pooled own df it holds (delta method on the
    log: the data part of rho varies as 2 m / (m + k)^2, pa as 2 / dpa).  The two are
    averaged by their df, and a carries their sum."""
    width = own.width
    r = own_ratio(own, prior, rounds)
    if r is not None and scale is not None and prior is not None:
        pa, pe = prior.rows.ms or 0.0, prior.res.ms or 0.0
        dr, dpa = rounds - 1, prior.rows.df  # the rows' df: the side's own (projected), the node's
        de = r.proj_df - dr
        m, k = scale.proj - dr, scale.k
        # the scale without this workload's rows needs some evidence: an overruled side
        # (k = 0) with one workload of one level has none, and its own rows are all it has
        other = scale.now - own.rows.df + k > 0
        shaped = 1.0 / ((m / (m + k) ** 2 if m + k > 0 else 0.0) + 1.0 / dpa) if other else 0.0
        a = scale.rho(own.rows.ss / pa, own.rows.df) * pa
        if own.rows.df > 0:  # the side's own launch rows
            a, rows_df = (shaped * a + dr * own.rows.ss / own.rows.df) / (shaped + dr), shaped + dr
        else:
            rows_df = shaped
        if rows_df <= 0:
            return None
        rho = scale.rho()
        res_df = de + min(k, prior.res.df)
        return Var(
            a=a,
            e=rho * pe,
            df_a=rows_df,
            df_e=res_df if width > 1 and res_df > 0 else rows_df,
            own=scale.overruled,
            e_cols=[rho * x for x in prior.jitter()],
        )
    if own.rows.df == 0:
        return None
    a = own.rows.ss / own.rows.df
    e = own.res.ss / own.res.df if own.res.df > 0 else 0.0
    e_cols = level_jitter(own.cols, own.res.df) if own.res.df > 0 else [0.0] * width
    return Var(a=a, e=e, df_a=float(rounds - 1), df_e=float(rounds - 1), own=True, e_cols=e_cols)


def satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    total = sum(v for v, _ in terms)
    denom = sum(v * v / d for v, d in terms if d > 0 and v > 0)
    return total * total / denom if denom > 0 else math.inf
