"""Plots for the journal: throughput vs concurrency per experiment, and a campaign overview.

Uses matplotlib's object API (`Figure` + Agg canvas) and never imports pyplot, so no GUI
backend or global figure state is involved: safe in a headless controller and in
threads.  File names derive from experiment ids, and PNG metadata carries no version or
date, so the same view gives byte-identical files (a regenerated journal diffs cleanly).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from campaign.domain.errors import UserError
from campaign.journal.format import (
    baseline_headline, fmt_pct, marker, metric_of, plot_file_name, plot_workloads, unit_of,
)
from campaign.domain.records import CampaignView, ExperimentView, LevelRow

__all__ = ["render_plots", "OVERVIEW_KEY", "plot_file_name", "plot_workloads", "experiment_figure",
           "overview_figure", "save_figure", "OVERVIEW_LAST"]

OVERVIEW_KEY = "_overview"
DPI = 90
CANDIDATE, BASELINE, TIE = "#1f77b4", "#7f7f7f", "#555555"
VERDICT_COLORS = {"win": "#2ca02c", "dead_end": "#d62728", "inconclusive": "#9e9e9e"}
_SAVE: dict[str, Any] = {"dpi": DPI, "format": "png", "metadata": {"Software": None}}


OVERVIEW_LAST = 40  # the overview's bar chart shows the latest experiments: 1,000 bars read as none


_multi_level_workloads = plot_workloads


def _level_axes(ax: Any, rows: list[LevelRow], workload: str, unit: str) -> None:
    rows = sorted(rows, key=lambda r: r.concurrency)
    for side, color, label in (("candidate", CANDIDATE, "candidate"), ("baseline", BASELINE, "baseline")):
        pts = [(r.concurrency, getattr(r, side), r.comparison) for r in rows if getattr(r, side) is not None]
        if not pts:
            continue
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        err = None
        if side == "candidate" and all(p[2] is not None for p in pts):
            # the CI is on the relative change; show it as an absolute band on the candidate
            comps = [p[2] for p in pts if p[2] is not None]
            err = [[y * max(0.0, -(c.ci_low_pct - c.delta_pct)) / 100 for y, c in zip(ys, comps)],
                   [y * max(0.0, c.ci_high_pct - c.delta_pct) / 100 for y, c in zip(ys, comps)]]
        ax.errorbar(xs, ys, yerr=err, color=color, marker="o", ms=4, lw=1.6, capsize=3, label=label)
    top = max((max(r.candidate or 0, r.baseline or 0) for r in rows), default=0)
    for r in rows:
        c = r.comparison
        if c is None or c.winner == "tie" or r.candidate is None or r.baseline is None:
            continue
        win_cand = c.winner == "candidate"
        adv = c.delta_pct if win_cand else (c.baseline_mean / c.candidate_mean - 1) * 100
        y = max(r.candidate, r.baseline)
        ax.annotate(f"{'C' if win_cand else 'B'} +{adv:.0f}%", (r.concurrency, y), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7, color=CANDIDATE if win_cand else BASELINE)
    ax.set_xscale("log")
    cs = [r.concurrency for r in rows]
    ax.set_xlim(min(cs) / 1.4, max(cs) * 1.4)
    ax.set_xticks([r.concurrency for r in rows])
    ax.set_xticklabels([str(r.concurrency) for r in rows], fontsize=8)
    ax.minorticks_off()
    ax.set_ylim(0, top * 1.15 if top else 1)
    ax.set_xlabel("concurrency C (log scale)")
    ax.set_ylabel(f"throughput ({unit}, node time)")
    ax.set_title(f"{workload}  (labels: winner's lead, B baseline, C candidate)", fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def experiment_figure(exp: ExperimentView, workloads: list[str]) -> Figure:
    fig = Figure(figsize=(5.2 * len(workloads), 3.6))
    FigureCanvasAgg(fig)
    unit = unit_of(metric_of(exp))
    for i, wl in enumerate(workloads, 1):
        _level_axes(fig.add_subplot(1, len(workloads), i), [r for r in exp.rows if r.workload == wl], wl, unit)
    fig.suptitle(f"{exp.hypothesis} (attempt {exp.attempt}): {marker(exp)}", fontsize=11)
    fig.subplots_adjust(left=0.09 / len(workloads) ** 0.5, right=0.98, bottom=0.15, top=0.82, wspace=0.25)
    return fig


def overview_figure(view: CampaignView) -> Figure | None:
    scored = [(n, e) for n, e in enumerate(view.experiments, 1) if e.verdict is not None][-OVERVIEW_LAST:]
    history = [(h, head[1]) for h in view.baseline_history
               if (head := baseline_headline(h, view.headline_workload)) is not None]
    if not scored and len(history) < 2:
        return None
    panels = 2 if len(history) >= 2 else 1
    fig = Figure(figsize=(5.5 * panels, 3.8))
    FigureCanvasAgg(fig)
    unit = unit_of(next((metric_of(e) for e in view.experiments if e.rows), "output_tokens_per_s"))
    ax = fig.add_subplot(1, panels, 1)
    labels, values, colors = [], [], []
    for n, e in scored:
        assert e.verdict is not None  # `scored` keeps only experiments with a verdict
        delta = e.verdict.headline_delta_pct if e.verdict.headline_delta_pct is not None else \
            next((r.comparison.delta_pct for r in e.rows if r.comparison), None)
        labels.append(textwrap.shorten(f"{n}. {e.hypothesis}", 34, placeholder="..."))
        values.append(delta or 0.0)
        colors.append(VERDICT_COLORS[e.verdict.kind])
        crashed = f" crashed ({e.verdict.failure_class.value})" if e.verdict.failure_class else " no figure"
        ax.text(delta or 0.0, len(labels) - 1, f" {fmt_pct(delta)}" if delta is not None else crashed,
                va="center", ha="left" if (delta or 0) >= 0 else "right", fontsize=7)
    ax.barh(range(len(values)), values, color=colors)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    span = max([abs(v) for v in values] + [5.0]) * 1.45
    ax.set_xlim(-span, span)
    ax.set_xlabel("headline change vs baseline (%)")
    ax.set_title("experiments (green win, red dead end, grey inconclusive)", fontsize=9)
    if panels == 2:
        hx = fig.add_subplot(1, 2, 2)
        ys = [y for _, y in history]
        hx.plot(range(len(ys)), ys, marker="o", color=CANDIDATE)
        for i, y in enumerate(ys):
            hx.annotate(f"{y:.1f}", (i, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        hx.set_xticks(range(len(ys)))
        hx.set_xticklabels([textwrap.fill(textwrap.shorten(f"{i}. {h.reason or 'measured'}", 60, placeholder=" ..."), 22) for i, (h, _) in enumerate(history, 1)],
                           fontsize=7)
        hx.set_xlim(-0.5, len(ys) - 0.5)
        hx.set_ylim(0, max(ys) * 1.2)
        hx.set_ylabel(f"baseline headline ({unit}, node time)")
        hx.set_title("how the baseline moved", fontsize=9)
        hx.grid(True, alpha=0.3)
    fig.suptitle(f"campaign {view.name}", fontsize=11)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: Path) -> None:
    """Write the PNG atomically (temp file beside it, then replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    fig.savefig(tmp, **_SAVE)
    os.replace(tmp, path)


def render_plots(view: CampaignView, out_dir: str | os.PathLike[str], *,
                 relative_to: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Write the PNGs into `out_dir`; map experiment id (and OVERVIEW_KEY) to the file's
    path relative to `relative_to` (default: out_dir's parent, where the journal lives)."""
    out = Path(out_dir)
    base = Path(relative_to) if relative_to is not None else out.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot create the plot directory ({exc.strerror}) (fix: make it writable)") from None
    made: dict[str, str] = {}

    def save(fig: Figure, name: str, key: str) -> None:
        save_figure(fig, out / name)
        made[key] = Path(os.path.relpath(out / name, base)).as_posix()

    for exp in view.experiments:
        workloads = _multi_level_workloads(exp)
        if workloads:  # a failed launch has no candidate levels: no plot
            save(experiment_figure(exp, workloads), plot_file_name(view, exp.id), exp.id)
    overview = overview_figure(view)
    if overview is not None:
        save(overview, "campaign-overview.png", OVERVIEW_KEY)
    return made
