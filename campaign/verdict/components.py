"""Variance components of one config's launches on the log scale: one R x L table
(rows = launches, columns = levels of a workload) split as a two-way layout.

Model of one launch's figure at level l (`campaign.verdict.noise` says why):

    x = mu_l + o + e_l      o: the launch's offset, shared by every level (variance s_o^2)
                            e_l: the level's jitter in that launch (variance s_e^2)

    rows      MS = L * variance of the launch means     E[MS] = L s_o^2 + s_e^2   df R - 1
    residual  MS of x - row mean - level mean + grand   E[MS] = s_e^2             df (R-1)(L-1)

A `Component` is a sum of squares with its df: they add up over tables.  Each level's
own jitter comes from its share of the residual (`level_jitter`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

__all__ = ["JITTER_SHRINK_DF", "Component", "Table", "decompose", "decompose_cols", "level_jitter", "log_table"]

#: weight (df) of the workload's mean jitter in each level's jitter estimate.
JITTER_SHRINK_DF = 8

Table = Sequence[Sequence[float]]  # rows = launches, columns = levels (log values)


class Component(BaseModel):
    """A sum of squares and its degrees of freedom: ms = ss / df."""

    ss: float = 0.0
    df: int = 0

    @property
    def ms(self) -> float | None:
        return self.ss / self.df if self.df > 0 else None

    def plus(self, other: Component) -> Component:
        return Component(ss=self.ss + other.ss, df=self.df + other.df)


def level_jitter(cols: Sequence[float], res_df: int) -> list[float]:
    """Each level's jitter variance from its residual sum of squares.  A level's residual
    also carries the other levels' jitter through the launch mean:
    E[SS_l] / (R - 1) = s_l^2 (1 - 2/L) + sum(s^2) / L^2, solved for s_l^2 (L > 2);
    floored at 5% of the mean so no level looks noise-free, and shrunk toward the mean
    with `JITTER_SHRINK_DF` (a level has under one df per group of launches: from a
    few launches its own estimate is mostly noise, from many it stands)."""
    width = len(cols)
    if res_df <= 0:
        return [0.0] * width
    per = [c / (res_df / (width - 1)) for c in cols]  # E[SS_l] / (R - 1), summed over tables
    if width <= 2:
        return [x * width / (width - 1) for x in per]
    total = math.fsum(per) * width / (width - 1)
    out = [(x - total / width**2) / (1 - 2 / width) for x in per]
    floor = 0.05 * total / width
    mean_e = total / width
    df_level = res_df / width  # each level's share of the residual df
    return [(df_level * max(floor, x) + JITTER_SHRINK_DF * mean_e) / (df_level + JITTER_SHRINK_DF) for x in out]


def log_table(rows: Sequence[Sequence[float]]) -> list[list[float]] | None:
    """Log values of a table of positive figures; None when one is not positive."""
    if any(x <= 0 or not math.isfinite(x) for r in rows for x in r):
        return None
    return [[math.log(x) for x in r] for r in rows]


def decompose(table: Table) -> tuple[Component, Component]:
    """(rows, residual) components of one R x L table of log values."""
    rows, res, _ = decompose_cols(table)
    return rows, res


def decompose_cols(table: Table) -> tuple[Component, Component, list[float]]:
    """`decompose`, and the residual sum of squares of each level."""
    r = len(table)
    if r < 2:
        return Component(), Component(), [0.0] * (len(table[0]) if table else 0)
    width = len(table[0])
    if width == 0 or any(len(row) != width for row in table):
        raise ValueError("a noise table needs the same levels in every launch")
    row_means = [math.fsum(row) / width for row in table]
    col_means = [math.fsum(row[j] for row in table) / r for j in range(width)]
    grand = math.fsum(row_means) / r
    rows_ss = width * math.fsum((m - grand) ** 2 for m in row_means)
    cols = [math.fsum((table[i][j] - row_means[i] - col_means[j] + grand) ** 2 for i in range(r)) for j in range(width)]
    return Component(ss=rows_ss, df=r - 1), Component(ss=math.fsum(cols), df=(r - 1) * (width - 1)), cols
