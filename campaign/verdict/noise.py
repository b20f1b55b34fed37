"""The node's noise model: how far one launch of the same config moves, estimated from
every launch the campaign made on that node in one environment.

Why: one experiment has two to six launches per side, so its own spread has one to
five degrees of freedom and its t quantile explodes; the node's run-to-run noise has
been measured many times already (the start baseline, the baseline side of every
interleaved round, every re-measurement).  That history is the prior; each experiment's
own spread updates it (`campaign.verdict.launches`).

Model, on the log scale, of one launch's figure at level l of a workload:

    x = mu_l + o + e_l      o: the launch's offset, shared by every level (variance s_o^2)
                            e_l: the level's jitter in that launch (variance s_e^2)

R launches of one config form an R x L table.  Its two-way decomposition gives

    rows      MS = L * variance of the launch means     E[MS] = L s_o^2 + s_e^2   df R - 1
    residual  MS of x - row mean - level mean + grand   E[MS] = s_e^2             df (R-1)(L-1)

Sums of squares and their df add up over tables (each table's own means removed, so a
slow drift between experiments is not counted as noise).  A table whose launches
disagree far beyond the rest (p < 0.001 against the pool of the others, e.g. one slow
launch) is left out of the node's estimate: that experiment's own analysis sees it.
A new node or a changed environment has no tables yet and starts its own estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field
from scipy import stats as _scipy_stats

__all__ = ["Component", "NodeNoise", "WorkloadNoise", "decompose", "decompose_cols", "estimate", "log_table"]

#: a table is an outlier of the node's history below this p-value (its launches
#: disagree far more than every other table's).
OUTLIER_P = 0.001
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


class WorkloadNoise(BaseModel):
    """One workload's variance components on this node (see the module doc).  `cols`:
    the residual sum of squares of each level, so a level with one request (a noisy
    figure) keeps its own jitter instead of the workload's average."""

    levels: int
    rows: Component = Field(default_factory=Component)
    res: Component = Field(default_factory=Component)
    cols: list[float] = Field(default_factory=list)
    launches: int = 0

    def jitter(self) -> list[float]:
        """Each level's jitter variance s_e,l^2 (their mean is the residual mean square)."""
        if self.res.df == 0 or not self.cols:
            return [0.0] * self.levels
        return level_jitter(self.cols, self.res.df)

    @property
    def usable(self) -> bool:
        return self.rows.df > 0

    def level_var(self) -> float | None:
        """s_o^2 + s_e^2: the variance of one launch's figure at one level."""
        a = self.rows.ms
        if a is None:
            return None
        e = self.res.ms if self.res.ms is not None else 0.0
        return max(a / self.levels + e * (self.levels - 1) / self.levels, a / self.levels)

    def pct(self) -> float | None:
        v = self.level_var()
        return None if v is None else math.expm1(math.sqrt(v)) * 100.0


class NodeNoise(BaseModel):
    """Every workload's components, and how many launches and tables they come from."""

    workloads: dict[str, WorkloadNoise] = Field(default_factory=dict)
    launches: int = 0
    tables: int = 0
    left_out: int = 0  # outlier tables kept out of the estimate

    def get(self, workload: str) -> WorkloadNoise | None:
        w = self.workloads.get(workload)
        return w if w is not None and w.usable else None

    def describe(self) -> str:
        """'node noise 1.4% from 14 launches (df 12)': what the journal shows."""
        parts = []
        for name, w in self.workloads.items():
            pct = w.pct()
            if pct is not None:
                parts.append(f"{name} {pct:.1f}% (df {w.rows.df + w.res.df})")
        if not parts:
            return "node noise unknown yet (no repeated launch on this node in this environment)"
        out = f"node noise {', '.join(parts)} from {self.launches} launches"
        return out + (f" ({self.left_out} outlier group{'s' if self.left_out != 1 else ''} left out)"
                      if self.left_out else "")


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
    cols = [math.fsum((table[i][j] - row_means[i] - col_means[j] + grand) ** 2 for i in range(r))
            for j in range(width)]
    return Component(ss=rows_ss, df=r - 1), Component(ss=math.fsum(cols), df=(r - 1) * (width - 1)), cols


def _outlier(rows: Component, pool: Component) -> bool:
    if rows.ms is None or pool.ms is None or pool.ms <= 0:
        return False
    return float(_scipy_stats.f.sf(rows.ms / pool.ms, rows.df, pool.df)) < OUTLIER_P


def estimate(groups: Iterable[Mapping[str, Table]]) -> NodeNoise:
    """Pool the tables of every group (one experiment's launches of one config: a dict
    workload -> R x L table of log values).  A workload keeps the level count it was
    first seen with; a table with another count (a changed workload) is skipped."""
    parts: dict[str, list[tuple[int, Component, Component, list[float]]]] = {}
    levels: dict[str, int] = {}
    for group in groups:
        for name, table in group.items():
            if len(table) < 2:
                continue
            width = levels.setdefault(name, len(table[0]))
            if len(table[0]) != width:
                continue
            parts.setdefault(name, []).append((len(table), *decompose_cols(table)))
    out = NodeNoise()
    launches, left_out = 0, 0
    for name, items in parts.items():
        w = WorkloadNoise(levels=levels[name])
        total_rows = Component()
        for _, rows, _, _ in items:
            total_rows = total_rows.plus(rows)
        w.cols = [0.0] * w.levels
        for n, rows, res, cols in items:
            others = Component(ss=total_rows.ss - rows.ss, df=total_rows.df - rows.df)
            if len(items) > 2 and _outlier(rows, others):
                left_out += 1
                continue
            w.rows, w.res, w.launches = w.rows.plus(rows), w.res.plus(res), w.launches + n
            w.cols = [a + b for a, b in zip(w.cols, cols)]
        out.workloads[name] = w
        launches = max(launches, w.launches)
    out.launches, out.tables = launches, sum(len(v) for v in parts.values()) // max(1, len(parts))
    out.left_out = left_out // max(1, len(parts))
    return out
