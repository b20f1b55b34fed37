"""One side of a comparison (candidate or baseline, one workload): its launch table,
screened for stalls, and its variance components with the node's noise as the prior.

Per side, the components (rows: L s_o^2 + s_e^2; residual: s_e^2) are the node's prior
updated by the side's own table: own and prior sums of squares, each over the prior's
mean square, give a ratio rho = (own ratio SS + k) / (own df + k) that scales the prior,
with k = the prior's df for the baseline (it is the node's config: full weight) and
`CANDIDATE_PRIOR_DF` for the candidate (another config may be noisier), both capped by the
node's `prior_df` where its noise varies between experiments.  When a side's own spread
is far above the prior (F test, p < `OVERRULE_P`: a slow launch, a noisy candidate) the
prior's weight is dropped for that side (k = 0).  `campaign.verdict.launches` compares
two sides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _scipy_stats

from campaign.verdict.components import Component, decompose_cols, level_jitter, log_table
from campaign.verdict.noise import WorkloadNoise, prior_scale
from campaign.verdict.screen import Scale, screen

__all__ = ["CANDIDATE_PRIOR_DF", "OVERRULE_P", "Ratio", "Side", "Var", "own_ratio", "pooled_scale",
           "satterthwaite", "side_table", "variance"]

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


def side_table(rows: list[list[float]], prior: WorkloadNoise | None, prior_df: float | None = None) -> Side | None:
    """One side's table, screened for stalls (`campaign.verdict.screen`) on the node's
    scale; a replaced cell costs the residual one df.  `prior_df`: what the node's noise
    is worth to one experiment where it moves between experiments (`NodeNoise.prior_df`);
    the launch tests weigh the node's launch spread by it, as the variance does.  Weighed
    by the history's full df, their cut was too tight on such a node: the verdict lab's
    `jitter` structure had a baseline launch dropped as a stall that was its ordinary
    offset, and a null level called a 13% loss.  The cell test keeps the full df: the
    stalls it exists for are single cells 20-65% low (the simulated node on a busy
    machine), which also make the node's noise move, and at the moderated df its cut
    would let the smaller ones through."""
    logs = log_table(rows)
    if logs is None or not logs:
        return None
    scale = prior_scale(prior)
    if scale is not None and prior_df is not None:  # the node's noise moves: its launch spread is worth fewer df
        scale = Scale(scale.jitter, scale.launch, scale.jitter_df, min(scale.launch_df, prior_df))
    sc = screen(logs, scale)
    r, e, cols = decompose_cols(sc.table)
    return Side(sc.table, r, Component(ss=e.ss, df=max(0, e.df - sc.cells)), cols, sc.cells, sc.launches,
                sc.undecided)


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
    return Ratio(ss=own.rows.ss / pa + (own.res.ss / pe if use_res else 0.0),  # type: ignore[operator]
                  now_df=own.rows.df + (own.res.df if use_res else 0),
                  prior_df=prior.rows.df + (prior.res.df if use_res else 0),
                  proj_df=(rounds - 1) + (max(0, (rounds - 1) * (width - 1) - own.stalled_cells) if use_res else 0))


def pooled_scale(ratios: Sequence[Ratio], k_max: float | None) -> tuple[float, float, bool]:
    """(rho, k, overruled) for one side, pooled over its workloads: a config's launches
    are noisier or not on every workload they run."""
    ss, now = math.fsum(r.ss for r in ratios), sum(r.now_df for r in ratios)
    prior = max(r.prior_df for r in ratios)
    overruled = now > 0 and _scipy_stats.f.sf(ss / now, now, prior) < OVERRULE_P
    k = 0.0 if overruled else float(prior if k_max is None else min(k_max, prior))
    return (ss + k) / (now + k) if now + k > 0 else 1.0, k, overruled


def variance(own: Side, prior: WorkloadNoise | None, scale: tuple[float, float, bool] | None,
              rounds: int) -> Var | None:
    """The side's components (module doc), with df as if it had `rounds` launches."""
    width = own.width
    r = own_ratio(own, prior, rounds)
    if r is not None and scale is not None and prior is not None:
        rho, k, overruled = scale
        pa, pe = prior.rows.ms or 0.0, prior.res.ms or 0.0
        return Var(a=rho * pa, e=rho * pe, df=r.proj_df + min(k, r.prior_df), own=overruled,
                    e_cols=[rho * x for x in prior.jitter()])
    if own.rows.df == 0:
        return None
    a = own.rows.ss / own.rows.df
    e = own.res.ss / own.res.df if own.res.df > 0 else 0.0
    e_cols = level_jitter(own.cols, own.res.df) if own.res.df > 0 else [0.0] * width
    return Var(a=a, e=e, df=float(rounds - 1), own=True, e_cols=e_cols)


def satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    total = sum(v for v, _ in terms)
    denom = sum(v * v / d for v, d in terms if d > 0 and v > 0)
    return total * total / denom if denom > 0 else math.inf
