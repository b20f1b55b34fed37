"""The Pareto panel of an experiment's plot: throughput per user against total throughput.

Why: raising concurrency buys total throughput with each user's speed; vLLM's sweep
plots exactly this front.  A config that moves the front up or right (EAGLE-3 at low C:
faster per user at the same total) is visible at a glance, where a throughput-only
panel hides what a user feels.  Per user is total / C: the level's output rate shared
by its C concurrent streams.  Each point is labelled with its C (candidate above,
baseline below).
"""

from __future__ import annotations

import math
from typing import Any

from campaign.domain.records import LevelRow
from campaign.journal.plot_labels import Label

__all__ = ["BASELINE", "CANDIDATE", "pareto_data", "pareto_frame", "pareto_limits", "pareto_points"]

CANDIDATE, BASELINE = "#1f77b4", "#7f7f7f"  # the two sides' colours in every plot


def pareto_points(rows: list[LevelRow], side: str) -> list[tuple[float, float, int]]:
    """(total, per user, C) of one side, by C."""
    pts = []
    for r in sorted(rows, key=lambda r: r.concurrency):
        total = getattr(r, side)
        if total is not None:
            pts.append((total, total / r.concurrency, r.concurrency))
    return pts


def pareto_frame(ax: Any, workload: str, unit: str) -> None:
    """What a Pareto panel shows whatever the experiment: labels and grid."""
    ax.set_xlabel(f"total throughput ({unit}, node time)")
    ax.set_yscale("log")
    ax.set_ylabel(f"per user ({unit} / C, log scale)")
    ax.set_title(f"{workload}: per user against total (points: C)", fontsize=8)
    ax.grid(True, alpha=0.3)


def pareto_limits(ax: Any, rows: list[LevelRow]) -> None:
    from campaign.journal.plots import y_top  # the same round limits as the throughput panels

    pts = pareto_points(rows, "candidate") + pareto_points(rows, "baseline")
    ax.set_xlim(0, y_top(max((p[0] for p in pts), default=0)))
    per_user = [p[1] for p in pts if p[1] > 0] or [1.0]
    # decades: per user falls 100x over a sweep (C=1 to 250); the labels need room above and below
    ax.set_ylim(10.0 ** math.floor(math.log10(min(per_user) / 1.3)), 10.0 ** math.ceil(math.log10(max(per_user) * 1.3)))


def pareto_data(ax: Any, rows: list[LevelRow]) -> list[Any]:
    """Both sides' fronts with their C labels; returns the artists it added."""
    added: list[Any] = []
    for side, color, offset in (("candidate", CANDIDATE, 5), ("baseline", BASELINE, -13)):
        pts = pareto_points(rows, side)
        if not pts:
            continue
        added.extend(
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker="o", ms=4, lw=1.6, zorder=2.1)
        )
        added.extend(Label(ax, str(c), (x, y), offset, color, 7) for x, y, c in pts)
    return added
