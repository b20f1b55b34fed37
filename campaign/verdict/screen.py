"""Stalls: a level or a whole launch that something outside the config slowed far beyond
the noise, screened out before the noise model and the comparison see them.

Interference (another job on the machine, a throttled clock, a descheduled load
generator) slows a measurement down and never speeds it up, and it hits one level or one
launch at a time.  On the bundled simulated node at 20x time compression on a shared
2-core machine, a 30 ms hiccup turns a 70 ms level into a -30% figure: launches that
otherwise agree within 2% carry single cells at -20% to -65% (issue 17's demo: a
single-stream launch at 27 tok/s among five at 68-79).  Left in, one such cell
dominates a side's spread: the node's prior is overruled and the interval explodes
(+-27% to +-73%), and the same cells inflate the node's prior for every later experiment.

Screen, on the log scale, one side's R x L table of one workload; each test is an
externally studentized residual (the suspect is left out of the scale it is judged on),
one-sided, Bonferroni over the table's cells at `STALL_P_CELLS` and its launches at
`STALL_P_LAUNCHES` (a table of pure Gaussian noise loses a cell once in a thousand, and
a launch once in a thousand):
* cells (L >= 2): a cell's prediction is its launch's effect (the median over its levels
  of its deviation from the levels' medians: a few stalled cells do not move it) plus the
  level's mean over the other launches; a cell is a stall when it lies below that by more
  than t(1 - STALL_P_CELLS / (R L)) of its spread.  It is replaced by its prediction and costs
  the residual one degree of freedom.
* launches (R >= 3): a launch whose mean lies below the others' mean by more than
  t(1 - STALL_P_LAUNCHES / R) of a launch mean's spread is dropped (one launch fewer on that side
  and workload); at most a third of a side's launches go.
The spread pools, by their df, the node's (the prior, from screened tables: each level's
jitter, a launch mean's spread) and the table's own with the suspect left out (its
residual mean square without that launch, df (R - 2)(L - 1); its launch means without
it, df R - 2).  With two launches nothing says which of two disagreeing launches is
off: the pair stays and its spread widens the side's interval.  Where the pair disagrees
by more than the launch test's cut on the node's scale, the table is marked `undecided`
and the stopping rule measures a third launch, which settles it
(`campaign.verdict.judge`).  A side noisier than the node is screened on its own
spread, so its ordinary noise is never cut away: the candidate (another config) weighs
the node's scale by fewer df (`campaign.verdict.sides.side_table`).  A cell far *above*
its prediction is not interference and stays.  Screened cells and launches are counted
per side and shown with the verdict.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from scipy import stats as _scipy_stats

__all__ = ["STALL_P_CELLS", "STALL_P_LAUNCHES", "Scale", "Screened", "pair_disagrees", "robust_scale", "screen"]

#: chance, per table, that a table of pure Gaussian noise loses a cell to the screen; and
#: a launch.  One-sided trimming moves a side's mean, and a moved level can decide that
#: level: at 0.01 the verdict lab's null cases turned into dead ends (a 3-launch baseline
#: table whose low launch was a 3.3-sigma draw, dropped), at 0.001 they do not.
STALL_P_CELLS = 0.001
STALL_P_LAUNCHES = 0.001


@dataclass
class Scale:
    """Standard deviations (log scale) from the node's prior: each level's jitter and
    one launch mean's spread, with the df they rest on."""

    jitter: list[float]
    launch: float
    jitter_df: float = math.inf
    launch_df: float = math.inf


@dataclass
class Screened:
    table: list[list[float]]  # rows = kept launches, stalled cells replaced by their prediction
    cells: int = 0  # stalled cells replaced
    launches: int = 0  # stalled launches dropped
    per_level: list[int] = field(default_factory=list)  # replaced cells per level
    undecided: bool = False  # two launches disagree like a stall: a third tells which

    @property
    def any(self) -> bool:
        return bool(self.cells or self.launches)


def _row_effects(table: Sequence[Sequence[float]]) -> list[float]:
    width = len(table[0])
    med = [statistics.median(row[j] for row in table) for j in range(width)]
    return [statistics.median(row[j] - med[j] for j in range(width)) for row in table]


def _residual_ms(table: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Two-way residual mean square of a table and its df."""
    r, width = len(table), len(table[0])
    df = (r - 1) * (width - 1)
    if df <= 0:
        return 0.0, 0
    rm = [math.fsum(row) / width for row in table]
    cm = [math.fsum(row[j] for row in table) / r for j in range(width)]
    g = math.fsum(rm) / r
    ss = math.fsum((table[i][j] - rm[i] - cm[j] + g) ** 2 for i in range(r) for j in range(width))
    return ss / df, df


def _threshold(p: float, scales: Sequence[tuple[float, float]]) -> float:
    """sd x one-sided t quantile at p, the sd pooled over (sd, df) estimates by their df
    (the side's own spread and the node's prior: a side noisier than the node raises it)."""
    usable = [(sd, min(df, 1e6)) for sd, df in scales if sd > 0 and df > 0]
    if not usable:
        return 0.0
    df = math.fsum(d for _, d in usable)
    var = math.fsum(sd * sd * d for sd, d in usable) / df
    return math.sqrt(var) * _t_isf(p, round(df, 6))


@lru_cache(maxsize=4096)
def _t_isf(p: float, df: float) -> float:
    return float(_scipy_stats.t.isf(p, df))


def _cells(rows_in: list[list[float]], prior: Scale | None, out: Screened) -> None:
    r, width = len(rows_in), len(rows_in[0])
    rows = _row_effects(rows_in)
    inflate = math.sqrt(1.0 + 1.0 / (r - 1))
    p = STALL_P_CELLS / (r * width)
    # the table's own residual is an average over its levels: the prior gives it its shape
    # (a single request at C=1 jitters more than 250 at C=250)
    shape = [1.0] * width
    if prior is not None:
        mean_sq = math.fsum(x * x for x in prior.jitter) / width
        if mean_sq > 0:
            shape = [x * x / mean_sq for x in prior.jitter]
    stalled = []
    for i in range(r):
        others = [rows_in[k] for k in range(r) if k != i]
        own_ms, own_df = _residual_ms(others) if r >= 3 else (0.0, 0)
        for j in range(width):
            pred = rows[i] + math.fsum(rows_in[k][j] - rows[k] for k in range(r) if k != i) / (r - 1)
            scales: list[tuple[float, float]] = [(math.sqrt(own_ms * shape[j]), float(own_df))]
            if prior is not None:
                scales.append((prior.jitter[j], prior.jitter_df))
            cut = _threshold(p, scales) * inflate
            if cut > 0 and rows_in[i][j] - pred < -cut:
                stalled.append((i, j))
    flagged = set(stalled)
    fills = []
    for i, j in stalled:  # predicted from the launches not stalled at that level
        others_j = [rows_in[k][j] - rows[k] for k in range(r) if k != i and (k, j) not in flagged]
        if others_j:
            fills.append((i, j, rows[i] + math.fsum(others_j) / len(others_j)))
    for i, j, value in fills:
        rows_in[i][j] = value
        out.cells += 1
        out.per_level[j] += 1


def _launches(rows_in: list[list[float]], prior: Scale | None) -> list[list[float]]:
    """The table without its stalled launches (at most a third of them)."""
    keep = list(rows_in)
    budget = len(keep) // 3
    while budget > 0 and len(keep) >= 3:
        r, width = len(keep), len(keep[0])
        means = [math.fsum(row) / width for row in keep]
        worst, worst_z = -1, 0.0
        for i in range(r):
            others = means[:i] + means[i + 1 :]
            scales: list[tuple[float, float]] = [(statistics.stdev(others), float(r - 2))]
            if prior is not None:
                scales.append((prior.launch, prior.launch_df))
            cut = _threshold(STALL_P_LAUNCHES / r, scales) * math.sqrt(1.0 + 1.0 / (r - 1))
            dev = means[i] - math.fsum(others) / (r - 1)
            if cut > 0 and dev < -cut and dev / cut < worst_z:
                worst, worst_z = i, dev / cut
        if worst < 0:
            break
        keep.pop(worst)
        budget -= 1
    return keep


#: a robust scale needs this many values (residuals per level, launch deviations).
MIN_ROBUST_VALUES = 16
_MAD = 1.4826  # median absolute deviation -> standard deviation, normal data
_MAD_EFFICIENCY = 0.37  # df a MAD-based variance is worth per value


def robust_scale(tables: Sequence[Sequence[Sequence[float]]]) -> Scale | None:
    """The node's robust scale over many tables of one workload: per level, the median
    absolute leave-one-out residual (launch effects by medians); per launch, the median
    absolute deviation of a launch's effect from the median of the others'.  A few
    stalls move neither, so this is the first pass of `noise.estimate`.  Needs
    `MIN_ROBUST_VALUES` values (per level, else over all levels); None without them."""
    if not tables:
        return None
    width = len(tables[0][0])
    per_level: list[list[float]] = [[] for _ in range(width)]
    launch: list[float] = []
    for t in tables:
        r = len(t)
        if r < 2 or len(t[0]) != width:
            continue
        inflate = math.sqrt(1.0 + 1.0 / (r - 1))
        rows = _row_effects(t)
        if width > 1:
            for row in _loo(t, rows):
                for j, x in enumerate(row):
                    per_level[j].append(abs(x) / inflate)
        launch.extend(abs(rows[i] - statistics.median(rows[:i] + rows[i + 1 :])) / inflate for i in range(r))
    if len(launch) < MIN_ROBUST_VALUES:
        return None
    everything = [x for v in per_level for x in v]
    overall = _MAD * statistics.median(everything) if len(everything) >= MIN_ROBUST_VALUES else 0.0
    jit = [_MAD * statistics.median(v) if len(v) >= MIN_ROBUST_VALUES else overall for v in per_level]
    n_jit = min((len(v) for v in per_level), default=0) if width > 1 else 0
    return Scale(
        jit,
        _MAD * statistics.median(launch),
        jitter_df=max(1.0, _MAD_EFFICIENCY * (n_jit if n_jit >= MIN_ROBUST_VALUES else len(everything))),
        launch_df=max(1.0, _MAD_EFFICIENCY * len(launch)),
    )


def _loo(table: Sequence[Sequence[float]], rows: Sequence[float]) -> list[list[float]]:
    """Leave-one-out residuals: cell minus its launch effect minus the level's mean over
    the other launches (their effects removed)."""
    r, width = len(table), len(table[0])
    tot = [math.fsum(table[k][j] - rows[k] for k in range(r)) for j in range(width)]
    return [
        [(table[i][j] - rows[i]) - (tot[j] - (table[i][j] - rows[i])) / (r - 1) for j in range(width)] for i in range(r)
    ]


def screen(table: Sequence[Sequence[float]], prior: Scale | None = None, *, on: bool = True) -> Screened:
    """Stalled cells replaced, then stalled launches dropped (module doc); `on` False:
    the table as measured (`RuleSettings.stall_screen`, for the verdict lab's ablation)."""
    rows_in = [list(row) for row in table]
    width = len(rows_in[0]) if rows_in else 0
    out = Screened(rows_in, per_level=[0] * width)
    if len(rows_in) < 2 or not on:
        return out
    if width > 1:
        _cells(rows_in, prior, out)
    kept = _launches(rows_in, prior)
    out.launches = len(rows_in) - len(kept)
    out.table = kept
    out.undecided = len(kept) == 2 and pair_disagrees(kept, prior)
    return out


def pair_disagrees(rows: Sequence[Sequence[float]], prior: Scale | None) -> bool:
    """Two launches whose means differ by more than the launch test's cut on the node's
    scale: one of them would be a stall, but nothing says which (module doc)."""
    if prior is None or prior.launch <= 0:
        return False
    width = len(rows[0])
    dev = abs(math.fsum(rows[0]) - math.fsum(rows[1])) / width
    cut = _threshold(STALL_P_LAUNCHES / 2, [(prior.launch, prior.launch_df)]) * math.sqrt(2.0)
    return dev > cut
