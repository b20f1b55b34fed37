"""Plots for the journal: per experiment, throughput against concurrency for every workload
and the per-user/total throughput trade-off of each sweep; and a campaign overview.

Uses matplotlib's object API (`Figure` + Agg canvas) and never imports pyplot, so no GUI
backend or global figure state is involved: safe in a headless controller and in
threads.  File names derive from experiment ids, and PNG metadata carries no version or
date, so the same view gives byte-identical files (a regenerated journal diffs cleanly).
"""

from __future__ import annotations

import math
import os
import struct
import textwrap
import threading
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from campaign.domain.errors import UserError
from campaign.domain.records import CampaignView, ExperimentView, LevelRow
from campaign.journal.baseline_section import baseline_headline, not_compared
from campaign.journal.format import (
    OVERVIEW_LAST,
    fmt_pct,
    metric_of,
    plot_file_name,
    plot_workloads,
    unit_of,
)
from campaign.journal.pareto import BASELINE, CANDIDATE, pareto_data, pareto_frame, pareto_limits
from campaign.journal.plot_labels import Label
from campaign.verdict.explain import compared_levels, deciding_levels, marker

__all__ = [
    "OVERVIEW_KEY",
    "OVERVIEW_LAST",
    "draw_experiment",
    "experiment_figure",
    "experiment_png",
    "has_overview",
    "overview_figure",
    "overview_png",
    "plot_file_name",
    "plot_workloads",
    "render_plots",
    "save_figure",
]

OVERVIEW_KEY = "_overview"
DPI = 90
VERDICT_COLORS = {"win": "#2ca02c", "dead_end": "#d62728", "inconclusive": "#9e9e9e"}


ERRORBAR_LINE_ZORDER = 2.1  # matplotlib's errorbar draws its data line there (its bars and caps: 2)
HISTORY_LAST = 12  # ...and its baseline panel the latest baselines


_multi_level_workloads = plot_workloads


def _level_frame(ax: Any, concurrencies: list[int], workload: str, unit: str) -> None:
    """What a workload's panel shows whatever the experiment: axes, ticks, labels."""
    ax.set_xscale("log")
    ax.set_xlim(min(concurrencies) / 1.4, max(concurrencies) * 1.4)
    ax.set_xticks(concurrencies)
    ax.set_xticklabels([str(c) for c in concurrencies], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("concurrency C (log scale)")
    ax.set_ylabel(f"throughput ({unit}, node time)")
    ax.set_title(f"{workload}  (labels: candidate vs baseline where a side won)", fontsize=8)
    ax.grid(True, alpha=0.3)


def _level_data(ax: Any, rows: list[LevelRow]) -> list[Any]:
    """One experiment's figures on a panel; returns the artists it added."""
    rows = sorted(rows, key=lambda r: r.concurrency)
    added: list[Any] = []
    for side, color in (("candidate", CANDIDATE), ("baseline", BASELINE)):
        pts = [(r.concurrency, getattr(r, side), r.comparison) for r in rows if getattr(r, side) is not None]
        if not pts:
            continue
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        err = None
        if side == "candidate" and all(p[2] is not None for p in pts):
            # the CI is on the relative change; show it as an absolute band on the candidate
            comps = [p[2] for p in pts if p[2] is not None]
            err = [
                [y * max(0.0, -(c.ci_low_pct - c.delta_pct)) / 100 for y, c in zip(ys, comps)],
                [y * max(0.0, c.ci_high_pct - c.delta_pct) / 100 for y, c in zip(ys, comps)],
            ]
        added.extend(_series(ax, xs, ys, err, color))
    for r in rows:
        c = r.comparison
        if c is None or c.winner == "tie" or r.candidate is None or r.baseline is None:
            continue
        win_cand = c.winner == "candidate"
        y = max(r.candidate, r.baseline)
        # the candidate's change, signed as everywhere else; coloured by the side that won
        # (a latency limit can give the level to the slower side)
        text = f"{c.delta_pct:+.0f}%" + (" limit" if c.limit_decided else "")
        added.append(Label(ax, text, (r.concurrency, y), 6, CANDIDATE if win_cand else BASELINE, 7))
    ax.set_ylim(0, panel_ylim(rows))
    return added


def _series(ax: Any, xs: list[int], ys: list[float], err: list[list[float]] | None, color: str) -> list[Any]:
    """One side's line, and its error bars with caps: the artists `ax.errorbar(xs, ys,
    yerr=err, color=color, marker="o", ms=4, lw=1.6, capsize=3)` makes, with its styles
    and z-orders (the line at 2.1, bars and caps at 2), for under half its cost (no unit
    handling, no autoscaling: the frame sets its limits itself).  The pixels are
    errorbar's (`test_a_side_looks_as_errorbar_drew_it`)."""
    added: list[Any] = ax.plot(xs, ys, color=color, marker="o", ms=4, lw=1.6, zorder=ERRORBAR_LINE_ZORDER)
    if err is None:
        return added
    lo = [y - e for y, e in zip(ys, err[0])]
    hi = [y + e for y, e in zip(ys, err[1])]
    bars = LineCollection(
        [[(x, a), (x, b)] for x, a, b in zip(xs, lo, hi)],
        colors=color,
        linewidths=1.6,
        linestyles="solid",
        zorder=2,
        label="_nolegend_",
    )
    ax.add_collection(bars, autolim=False)
    added.append(bars)
    for edge in (lo, hi):
        cap = Line2D(
            xs,
            edge,
            marker="_",
            linestyle="none",
            markersize=6,
            color=color,
            markeredgecolor=color,
            zorder=2,
            label="_nolegend_",
        )
        ax.add_line(cap)
        added.append(cap)
    return added


_NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def panel_ylim(rows: list[LevelRow]) -> float:
    """The y axis's upper limit for a panel showing `rows`."""
    return y_top(max((max(r.candidate or 0, r.baseline or 0) for r in rows), default=0))


def y_top(top: float) -> float:
    """The y axis's upper limit for a panel whose highest point is `top`: at least 15%
    above it (room for the labels), rounded up to a round number.  A round limit reads
    better, and experiments of one campaign then share a handful of y axes, which a frame
    draws once each."""
    if top <= 0:
        return 1.0
    need = top * 1.15
    scale = 10.0 ** math.floor(math.log10(need))
    return next(step * scale for step in _NICE if step * scale >= need * (1 - 1e-12))


class Panel(NamedTuple):
    """One panel of an experiment's plot: `kind` "levels" (throughput against C) or
    "pareto" (per-user against total throughput, `campaign.journal.pareto`)."""

    kind: str
    workload: str
    rows: list[LevelRow]
    levels: list[int]


def _panels(exp: ExperimentView, workloads: list[str]) -> list[Panel]:
    """Throughput against C for every workload the experiment measured, then the Pareto
    trade-off of each one with a sweep (`workloads`: those, `plot_workloads`)."""
    out = []
    for kind, names in (("levels", list(dict.fromkeys(r.workload for r in exp.rows))), ("pareto", workloads)):
        for wl in names:
            rows = [r for r in exp.rows if r.workload == wl]
            out.append(Panel(kind, wl, rows, sorted({r.concurrency for r in rows})))
    return out


def _set_limits(ax: Any, panel: Panel) -> None:
    """The data-dependent limits, set before the data: they pick a frame's kept pixels."""
    if panel.kind == "pareto":
        pareto_limits(ax, panel.rows)
    else:
        ax.set_ylim(0, panel_ylim(panel.rows))


def _panel_data(ax: Any, panel: Panel) -> list[Any]:
    return pareto_data(ax, panel.rows) if panel.kind == "pareto" else _level_data(ax, panel.rows)


def _new_figure(panels: list[Panel], unit: str) -> tuple[Figure, list[Any]]:
    n = len(panels)
    fig = Figure(figsize=(5.2 * n, 3.9), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = []
    for i, panel in enumerate(panels, 1):
        ax = fig.add_subplot(1, n, i)
        if panel.kind == "pareto":
            pareto_frame(ax, panel.workload, unit)
        else:
            _level_frame(ax, panel.levels, panel.workload, unit)
        axes.append(ax)
    # one legend for the figure, below the panels: outside every axes, no data can hide it
    fig.legend(
        handles=[
            Line2D([], [], color=color, marker="o", ms=4, lw=1.6, label=label)
            for color, label in ((CANDIDATE, "candidate"), (BASELINE, "baseline"))
        ],
        fontsize=8,
        loc="lower center",
        ncol=2,
        frameon=False,
    )
    fig.subplots_adjust(left=0.14 / n**0.5, right=0.98, bottom=0.23, top=0.84, wspace=0.3)
    return fig, axes


def experiment_figure(exp: ExperimentView, workloads: list[str]) -> Figure:
    """A new figure of one experiment (`draw_experiment` reuses frames: same pixels, faster)."""
    panels = _panels(exp, workloads)
    fig, axes = _new_figure(panels, unit_of(metric_of(exp)))
    for ax, panel in zip(axes, panels):
        _set_limits(ax, panel)
        _panel_data(ax, panel)
    fig.suptitle(_title(exp), fontsize=11)
    return fig


def _title(exp: ExperimentView) -> str:
    return f"{exp.hypothesis} (attempt {exp.attempt}): {marker(exp)}"


class _Frame:
    """A figure for one layout (the workloads, their levels and the unit) whose unchanging
    part is drawn once and kept as pixels: the axes with their ticks, labels and grid, the
    panel titles and the legend, one copy per set of y limits (`y_top` rounds them, so a
    campaign's experiments share a few).  Each experiment then draws only its data and
    title on top (matplotlib's blitting).  A full draw paints the kept part first and its
    artists in z-order; the frame draws the rest in that same order, so the pixels are a
    new figure's (`test_a_reused_frame_draws_exactly_what_a_new_figure_draws`).  Text is
    most of a plot's cost, and most of the text is the frame's."""

    KEPT = 16  # y-limit sets kept per layout (about 1.3 MB each)

    def __init__(self, panels: list[Panel], unit: str) -> None:
        self.fig, self.axes = _new_figure(panels, unit)
        self.title = self.fig.suptitle("", fontsize=11)
        self.data: list[Any] = []
        self.kept: OrderedDict[tuple[tuple[float, ...], ...], Any] = OrderedDict()
        self.canvas: Any = self.fig.canvas  # the Agg canvas `_new_figure` made

    def _background(self) -> Any:
        """The kept pixels for the axes' current y limits (drawn now if new)."""
        key = tuple((*ax.get_xlim(), *ax.get_ylim()) for ax in self.axes)
        pixels = self.kept.pop(key, None)
        if pixels is None:
            hidden = [self.title, *(s for ax in self.axes for s in ax.spines.values())]
            for artist in hidden:  # drawn after the data in a full draw: not kept
                artist.set_visible(False)
            self.canvas.draw()
            pixels = self.canvas.copy_from_bbox(self.fig.bbox)
            for artist in hidden:
                artist.set_visible(True)
        self.kept[key] = pixels
        while len(self.kept) > self.KEPT:
            self.kept.popitem(last=False)
        return pixels

    def draw(self, exp: ExperimentView, panels: list[Panel], path: Path) -> None:
        for artist in self.data:
            artist.remove()
        self.data = []
        for ax, panel in zip(self.axes, panels):
            _set_limits(ax, panel)  # known before the data: they pick the kept pixels
        background = self._background()
        self.data = [a for ax, panel in zip(self.axes, panels) for a in _panel_data(ax, panel)]
        self.title.set_text(_title(exp))
        self.canvas.restore_region(background)
        for ax in self.axes:
            kept = {ax.patch, ax.xaxis, ax.yaxis, ax.title, ax._left_title, ax._right_title}
            for artist in sorted(ax.get_children(), key=lambda a: a.get_zorder()):  # a full draw's order
                if artist not in kept and artist.get_visible():
                    ax.draw_artist(artist)
        self.fig.draw_artist(self.title)
        _write_png(self.canvas, path)


_FRAMES: OrderedDict[tuple[Any, ...], _Frame] = OrderedDict()
_FRAMES_KEPT = 4
_frames_lock = threading.Lock()


def draw_experiment(exp: ExperimentView, workloads: list[str], path: Path) -> None:
    """Draw one experiment's plot into `path` (atomically), on a frame kept for its layout."""
    panels = _panels(exp, workloads)
    unit = unit_of(metric_of(exp))
    key = (unit, tuple((p.kind, p.workload, tuple(p.levels)) for p in panels))
    with _frames_lock:
        frame = _FRAMES.pop(key, None) or _Frame(panels, unit)
        _FRAMES[key] = frame
        while len(_FRAMES) > _FRAMES_KEPT:
            _FRAMES.popitem(last=False)
        frame.draw(exp, panels, path)


def _overview_inputs(view: CampaignView) -> tuple[list[tuple[int, ExperimentView]], list[tuple[int, Any, float, bool]]]:
    """The scored experiments and the baseline's history the overview draws."""
    numbered = ((view.numbers[e.id] if view.numbers else n, e) for n, e in enumerate(view.experiments, 1))
    scored = [(n, e) for n, e in numbered if e.verdict is not None][-OVERVIEW_LAST:]
    heads = [
        (number, h, head)
        for number, h in enumerate(view.baseline_history, 1)  # numbered as the journal lists them
        if (head := baseline_headline(h, view.headline_workload)) is not None
    ]
    history = [
        (number, h, head.value, i > 0 and not_compared(head, h, heads[i - 1][2], heads[i - 1][1]) is None)
        for i, (number, h, head) in enumerate(heads)
    ]
    return scored, history


def has_overview(view: CampaignView) -> bool:
    """Whether `overview_figure` draws anything: a verdict, or a baseline that moved."""
    scored, history = _overview_inputs(view)
    return bool(scored) or len(history) >= 2


def overview_figure(view: CampaignView) -> Figure | None:
    scored, history = _overview_inputs(view)
    if not scored and len(history) < 2:
        return None
    panels = 2 if len(history) >= 2 else 1
    fig = Figure(figsize=(5.5 * panels, max(3.8, 1.3 + 0.17 * len(scored))), dpi=DPI)  # a bar, a label's height
    FigureCanvasAgg(fig)
    unit = unit_of(next((metric_of(e) for e in view.experiments if e.rows), "output_tokens_per_s"))
    ax = fig.add_subplot(1, panels, 1)
    labels, values, colors = [], [], []
    for n, e in scored:
        assert e.verdict is not None  # `scored` keeps only experiments with a verdict
        deciding = deciding_levels(e.verdict, compared_levels(e))  # the scoreboard's figure: the level that decided
        delta = deciding[0].delta_pct if deciding else None
        labels.append(textwrap.shorten(f"{n}. {e.hypothesis}", 34, placeholder="..."))
        values.append(delta or 0.0)
        colors.append(VERDICT_COLORS[e.verdict.kind])
        crashed = f" crashed ({e.verdict.failure_class.value})" if e.verdict.failure_class else " no figure"
        ax.text(
            delta or 0.0,
            len(labels) - 1,
            f" {fmt_pct(delta)}" if delta is not None else crashed,
            va="center",
            ha="left" if (delta or 0) >= 0 else "right",
            fontsize=7,
        )
    ax.barh(range(len(values)), values, color=colors)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    span = max([abs(v) for v in values] + [5.0]) * 1.45
    ax.set_xlim(-span, span)
    ax.set_xlabel("candidate vs baseline at the deciding level (%)")
    shown = f"the last {len(scored)} experiments" if len(scored) == OVERVIEW_LAST else "experiments"
    ax.set_title(f"{shown} (green win, red dead end, grey inconclusive)", fontsize=9)
    if panels == 2:
        _baseline_panel(fig.add_subplot(1, 2, 2), history, unit)
    fig.suptitle(f"campaign {view.name}", fontsize=11)
    fig.tight_layout()
    return fig


def _baseline_panel(hx: Any, history: list[tuple[int, Any, float, bool]], unit: str) -> None:
    """How the baseline's headline moved: the last HISTORY_LAST baselines.  A few are
    labelled with their reason; more are numbered as in the journal's list (reasons under
    a dozen points would print over each other).  A line joins only baselines that
    compare with the one before (`baseline_section.not_compared`: same headline, same work)."""
    first = max(0, len(history) - HISTORY_LAST)
    shown = history[first:]
    ys = [y for _, _, y, _ in shown]
    start = 0
    for i in range(1, len(ys) + 1):
        if i == len(ys) or not shown[i][3]:
            hx.plot(range(start, i), ys[start:i], marker="o", color=CANDIDATE)
            start = i
    for i, y in enumerate(ys):
        hx.annotate(f"{y:.1f}", (i, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    hx.set_xticks(range(len(ys)))
    if len(history) <= 4:
        hx.set_xticklabels(
            [
                textwrap.fill(textwrap.shorten(f"{number}. {h.reason or 'measured'}", 60, placeholder=" ..."), 22)
                for number, h, _, _ in shown
            ],
            fontsize=7,
        )
    else:
        hx.set_xticklabels([str(number) for number, _, _, _ in shown], fontsize=7)
        hx.set_xlabel("baseline, numbered as in the journal's list")
    hx.set_xlim(-0.5, len(ys) - 0.5)
    hx.set_ylim(0, max(ys) * 1.2)
    hx.set_ylabel(f"baseline headline ({unit}, node time)")
    hx.set_title("how the baseline moved" + (f" (the last {HISTORY_LAST})" if first else ""), fontsize=9)
    hx.grid(True, alpha=0.3)


def save_figure(fig: Figure, path: Path) -> None:
    """Draw `fig` and write its PNG (atomically)."""
    canvas: Any = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    _write_png(canvas, path)


def figure_png(fig: Figure) -> bytes:
    """The PNG bytes of `fig`, as `save_figure` writes them (the web view serves these)."""
    canvas: Any = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return png_bytes(np.asarray(canvas.buffer_rgba())[..., :3], DPI)


def experiment_png(exp: ExperimentView) -> bytes | None:
    """One experiment's plot as PNG bytes, or None when it has nothing to plot (a failed launch)."""
    workloads = _multi_level_workloads(exp)
    return figure_png(experiment_figure(exp, workloads)) if workloads else None


def overview_png(view: CampaignView) -> bytes | None:
    fig = overview_figure(view)
    return None if fig is None else figure_png(fig)


def _write_png(canvas: Any, path: Path) -> None:
    """Write what `canvas` holds now as an RGB PNG, atomically (temp file beside it, then
    replace).  The figures are opaque, so RGB loses nothing.  The file is written here
    from the pixels (`png_bytes`), not by Pillow: Pillow filters every row of a truecolour
    image adaptively (five trial filters per row) and has no option to skip it, which was
    11 ms of a plot's 64; unfiltered rows at zlib's fastest level take 3 ms for a file of
    the same size (a plot is mostly flat colour).  No version or date goes into it: the
    same view gives the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_bytes(png_bytes(np.asarray(canvas.buffer_rgba())[..., :3], DPI))
    os.replace(tmp, path)


def png_bytes(rgb: Any, dpi: float) -> bytes:
    """An 8-bit RGB PNG (ISO/IEC 15948) of an H x W x 3 uint8 array: IHDR, pHYs (the dpi),
    one IDAT of unfiltered rows (filter byte 0) at zlib level 1, IEND."""
    height, width = int(rgb.shape[0]), int(rgb.shape[1])
    rows = np.empty((height, 1 + 3 * width), dtype=np.uint8)
    rows[:, 0] = 0
    pixels = rows[:, 1:].view()
    pixels.shape = (height, width, 3)  # a view of the rows (raises rather than copy)
    pixels[...] = rgb
    per_metre = round(dpi / 0.0254)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
            chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)),
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)),
            chunk(b"IEND", b""),
        )
    )


def render_plots(
    view: CampaignView, out_dir: str | os.PathLike[str], *, relative_to: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """Write the PNGs into `out_dir`; map experiment id (and OVERVIEW_KEY) to the file's
    path relative to `relative_to` (default: out_dir's parent, where the journal lives)."""
    out = Path(out_dir)
    base = Path(relative_to) if relative_to is not None else out.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot create the plot directory ({exc.strerror}) (fix: make it writable)") from None
    made: dict[str, str] = {}

    def rel(name: str) -> str:
        return Path(os.path.relpath(out / name, base)).as_posix()

    for exp in view.experiments:
        workloads = _multi_level_workloads(exp)
        if workloads:  # a failed launch has no candidate levels: no plot
            name = plot_file_name(view, exp.id)
            draw_experiment(exp, workloads, out / name)
            made[exp.id] = rel(name)
    overview = overview_figure(view)
    if overview is not None:
        save_figure(overview, out / "campaign-overview.png")
        made[OVERVIEW_KEY] = rel("campaign-overview.png")
    return made
