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

R launches of one config form an R x L table; its two-way decomposition into a rows
and a residual component is `campaign.verdict.components`'.  Sums of squares and their
df add up over tables (each table's own means removed, so a
slow drift between experiments is not counted as noise).  Each table is screened for
stalls first (`campaign.verdict.screen`: a level or a launch slowed far beyond the
noise by something outside the config), on the robust scale of every table of the
workload, so the prior describes the node's noise and not its hiccups; each replaced
cell costs the residual one df, a dropped launch its row.  A table whose launches
disagree far beyond the rest (p < 0.001 against the pool of the others, e.g. one slow
launch) is left out of the node's estimate: that experiment's own analysis sees it.
A new node or a changed environment has no tables yet and starts its own estimate.

The estimate reads the latest `HISTORY` experiments' launches, not all of them: every
decision re-estimates (each table is screened on the scale of all the others), so a
week-long campaign of 1,000+ experiments would pay for its whole history at every
round; 200 experiments still give the estimate several hundred launches (two to six
per experiment), and a node's noise of long ago says less about it today than its
latest launches do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field
from scipy import stats as _scipy_stats

from campaign.playbook.schema import RepeatsSpec
from campaign.verdict.components import JITTER_SHRINK_DF, Component, Table, decompose_cols, level_jitter
from campaign.verdict.moderation import prior_df
from campaign.verdict.screen import Scale, robust_scale, screen
from campaign.verdict.settings import SHIPPED, RuleSettings
from campaign.verdict.shared_offsets import shared_offsets

__all__ = ["LaunchLevel", "NodeNoise", "WorkloadNoise", "baseline_launches", "estimate", "prior_df", "prior_scale"]

#: a table is an outlier of the node's history below this p-value (its launches
#: disagree far more than every other table's).
OUTLIER_P = 0.001
HISTORY = 200  # experiments whose launches the node's estimate reads (module doc)


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
        """Each level's jitter variance s_e,l^2 (the moment estimator, `level_jitter`)."""
        if self.res.df == 0 or not self.cols:
            return [0.0] * self.levels
        return level_jitter(self.cols, self.res.df)

    @property
    def usable(self) -> bool:
        return self.rows.df > 0

    def offset_var(self) -> float:
        """s_o^2: the variance of one launch's offset (for one level: its whole variance)."""
        a = self.rows.ms or 0.0
        return max(0.0, (a - (self.res.ms or 0.0)) / self.levels)

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


class LaunchLevel(BaseModel):
    """The mean over recent launches of one launch's mean over a workload's levels (log)."""

    mean: float
    launches: int


class NodeNoise(BaseModel):
    """Every workload's components, and how many launches and tables they come from."""

    workloads: dict[str, WorkloadNoise] = Field(default_factory=dict)
    launches: int = 0
    tables: int = 0
    #: workload -> workload -> how much of their launch offsets the two share: a
    #: conservative correlation (`shared_offsets`); absent: none shown yet
    shared: dict[str, dict[str, float]] = Field(default_factory=dict)
    left_out: int = 0  # outlier tables kept out of the estimate
    stalled_cells: int = 0  # levels of a launch screened as stalls (`campaign.verdict.screen`)
    stalled_launches: int = 0
    #: how many df the pooled noise is worth for one experiment (`prior_df`); None: as many
    #: as it has (the node's noise did not vary between experiments beyond chance)
    prior_df: float | None = None
    #: workload -> where the compared baseline config's launches sat lately
    #: (`campaign.verdict.baseline_level`); empty: not known
    level: dict[str, LaunchLevel] = Field(default_factory=dict)

    def get(self, workload: str) -> WorkloadNoise | None:
        w = self.workloads.get(workload)
        return w if w is not None and w.usable else None

    def shared_offset(self, a: str, b: str) -> float:
        """The correlation of the launch offsets of workloads `a` and `b` (0: not shown)."""
        return self.shared.get(a, {}).get(b, 0.0)

    def describe(self) -> str:
        """'node noise single_stream 1.4% (df 12), parallel 1.6% (df 12 between launches,
        84 within) from 14 launches': what the journal shows.  A sweep's launch offsets
        (its common effect's variance) rest on the df between launches alone."""
        parts = []
        for name, w in self.workloads.items():
            pct = w.pct()
            if pct is not None:
                df = f"df {w.rows.df} between launches, {w.res.df} within" if w.levels > 1 else f"df {w.rows.df}"
                parts.append(f"{name} {pct:.1f}% ({df})")
        if not parts:
            return "node noise unknown yet (no repeated launch on this node in this environment)"
        out = f"node noise {', '.join(parts)} from {self.launches} launches"
        if self.left_out:
            out += f" ({self.left_out} outlier group{'s' if self.left_out != 1 else ''} left out)"
        pairs = [r for a, row in self.shared.items() for b, r in row.items() if a < b]
        if pairs:
            out += f" (workloads share each launch's offset: r >= {min(pairs):.2f})"
        if self.prior_df is not None:
            out += f" (its noise varies between experiments: the prior counts as df {self.prior_df:.0f})"
        if self.stalled_cells or self.stalled_launches:
            out += f" ({self.stalled_cells} stalled levels, {self.stalled_launches} stalled launches screened)"
        return out


def _outlier(rows: Component, pool: Component) -> bool:
    if rows.ms is None or pool.ms is None or pool.ms <= 0:
        return False
    return float(_scipy_stats.f.sf(rows.ms / pool.ms, rows.df, pool.df)) < OUTLIER_P


def estimate(
    groups: Iterable[Mapping[str, Table]], aligned: Sequence[bool] | None = None, settings: RuleSettings = SHIPPED
) -> NodeNoise:
    """Pool the tables of every group (one experiment's launches of one config: a dict
    workload -> R x L table of log values).  A workload keeps the level count it was
    first seen with; a table with another count (a changed workload) is skipped.
    `aligned`: per group, whether row i of every table is the same launch (default:
    yes); only such groups show how much of a launch's offset the workloads share
    (`campaign.verdict.shared_offsets`).  `settings`: the rule's components (the stall
    screen, the moderated prior)."""
    tables: dict[str, list[Table]] = {}
    group_of: dict[str, list[int]] = {}
    levels: dict[str, int] = {}
    for g, group in enumerate(groups):
        for name, table in group.items():
            if len(table) < 2:
                continue
            width = levels.setdefault(name, len(table[0]))
            if len(table[0]) != width:
                continue
            tables.setdefault(name, []).append(table)
            group_of.setdefault(name, []).append(g)
    means: dict[int, dict[str, list[float]]] = {}
    parts: dict[str, list[tuple[int, Component, Component, list[float]]]] = {}
    stalled_cells = stalled_launches = 0
    for name, ts in tables.items():
        # the node's robust scale from every table (a median is not moved by a few stalls),
        # then its classical scale from the tables screened on that: the final screen
        scale = prior_scale(_pool(ts, levels[name], robust_scale(ts), settings.stall_screen))
        for table, g in zip(ts, group_of[name]):
            sc = screen(table, scale, on=settings.stall_screen)
            stalled_cells, stalled_launches = stalled_cells + sc.cells, stalled_launches + sc.launches
            if not sc.launches and (aligned is None or aligned[g]):
                means.setdefault(g, {})[name] = [math.fsum(row) / len(row) for row in sc.table]
            rows, res, cols = decompose_cols(sc.table)
            parts.setdefault(name, []).append((len(sc.table), rows, _less_df(res, sc.cells), cols))
    out = NodeNoise(stalled_cells=stalled_cells, stalled_launches=stalled_launches)
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
    # every table's residual standardized by the levels' jitter (one request at C=1
    # jitters 16x as much as 250 at C=250: unstandardized, a table's residual mean square
    # is a few noisy levels and looks heterogeneous between tables when it is not)
    shared: list[list[Component]] = []
    for name, items in parts.items():
        jit = out.workloads[name].jitter()
        mean_e = math.fsum(jit) / len(jit) if jit else 0.0
        weights = [mean_e / x if x > 0 and mean_e > 0 else 1.0 for x in jit]
        shared.append([rows for _, rows, _, _ in items])
        shared.append(
            [Component(ss=math.fsum(c * wt for c, wt in zip(cols, weights)), df=res.df) for _, _, res, cols in items]
        )
    out.prior_df = prior_df(shared) if settings.moderated_prior else None
    out.shared = shared_offsets(
        list(means.values()), {name: w.offset_var() for name, w in out.workloads.items() if w.usable}
    )
    return out


def _less_df(c: Component, cells: int) -> Component:
    """A residual component with `cells` replaced by their prediction: one df each."""
    return Component(ss=c.ss, df=max(0, c.df - cells))


def _pool(tables: Sequence[Table], width: int, scale: Scale | None, on: bool = True) -> WorkloadNoise:
    """Every table's components summed, each table screened on `scale` (None: on its own).
    The screening scale errs wide, so only a cell far outside it is called a stall."""
    w = WorkloadNoise(levels=width, cols=[0.0] * width)
    for table in tables:
        sc = screen(table, scale, on=on)
        rows, res, cols = decompose_cols(sc.table)
        w.rows, w.res = w.rows.plus(rows), w.res.plus(_less_df(res, sc.cells))
        w.cols = [a + b for a, b in zip(w.cols, cols)]
        w.launches += len(sc.table)
    return w


def prior_scale(w: WorkloadNoise | None) -> Scale | None:
    """The node's scale for screening one side (`campaign.verdict.screen`): each level's
    jitter and a launch mean's spread, with their df."""
    if w is None or not w.usable:
        return None
    jit = [math.sqrt(max(0.0, v)) for v in w.jitter()]
    # a level's jitter rests on its share of the residual df (plus the shrinkage's)
    return Scale(
        jit,
        math.sqrt(max(0.0, w.rows.ms or 0.0) / w.levels),
        jitter_df=w.res.df / max(1, w.levels - 1) + JITTER_SHRINK_DF,
        launch_df=float(w.rows.df),
    )


def baseline_launches(repeats: RepeatsSpec, known: NodeNoise, workloads: Sequence[str] = ()) -> int:
    """How many launches a baseline measurement takes.  Where the node has no launch in
    this environment yet (`known.launches == 0`: the campaign's start, a changed
    fingerprint), or one of `workloads` has none of the work it does now (its work
    changed: `campaign.domain.work`), `repeats.baseline`: the first experiments' intervals rest
    on that floor alone, and 2 launches give it 1 df between launches (a 95% t quantile
    of 12.7; 4 launches: 3 df, 3.2).  In the verdict lab, 4 launches instead of 2 cut
    `heavy_tail`'s strong misses by a fifth, most of them in each node's first five
    experiments (`bench/verdict_lab.py`; docs/benchmarks/verdict-lab.md).  With no history the screen still cannot drop an
    8% stall from 4 launches (its launch test has 2 df there).  Later re-measurements
    (an adopted win) add to a history: `max(2, repeats.min)`."""
    floor = max(2, repeats.min)
    fresh = known.launches == 0 or any(w not in known.workloads for w in workloads)
    return max(floor, repeats.baseline) if fresh else floor
