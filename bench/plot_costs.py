"""What one experiment plot costs, and each replaced step beside the way it was done before.

Builds a campaign through the store API (`bench/scale_build.py`, the scale bench's
experiments), then, in this process, CPU time per plot (`time.process_time`, the best of 3
passes over the plottable experiments):

* `draw_experiment`: the whole plot as a plot worker draws it (frame reused, PNG written);
* the PNG: `png_bytes` against Pillow's writer (what `_write_png` used before);
* the level labels: `plot_labels.Label` against `Axes.annotate`, 8 labels created and drawn;
* one side with error bars: `plots._series` against `Axes.errorbar`, created;
* the title: one `suptitle` drawn (the largest step left).

    PYTHONPATH=. python bench/plot_costs.py [--n 60]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from bench import scale_build
from campaign.journal import plots
from campaign.journal.plot_labels import Label
from campaign.store import Store

XS = [1, 2, 5, 10, 30, 70, 100, 250]


def best_ms(fn: Callable[[], object], reps: int, passes: int = 3) -> float:
    """CPU ms per call, the best of `passes` passes of `reps` calls."""
    fn()  # warm: caches, fonts, frames
    best = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - t0) / reps)
    return best * 1000


def _axes() -> tuple[Figure, object]:
    fig = Figure(figsize=(5.2, 3.9), dpi=plots.DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_xlim(0.7, 350)
    ax.set_ylim(0, 1000)
    fig.canvas.draw()
    return fig, ax


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60, help="experiments in the campaign")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plot-costs-") as tmp:
        cid = scale_build.build(Path(tmp) / "campaign.db", args.n)
        with Store(Path(tmp) / "campaign.db") as store:
            view = store.view(cid)
        exps = [(e, plots.plot_workloads(e)) for e in view.experiments if plots.plot_workloads(e)]
        out = Path(tmp) / "p.png"
        it = iter(range(10**9))

        def one_plot() -> None:
            e, w = exps[next(it) % len(exps)]
            plots.draw_experiment(e, w, out)

        rows = [("draw_experiment (the whole plot)", best_ms(one_plot, len(exps)), None)]

        canvas = plots.experiment_figure(*exps[0]).canvas
        canvas.draw()
        rgb = np.asarray(canvas.buffer_rgba())[..., :3]

        def pillow() -> None:
            Image.fromarray(rgb).save(io.BytesIO(), format="png", compress_level=1, dpi=(plots.DPI, plots.DPI))

        rows.append(("PNG of one plot", best_ms(lambda: plots.png_bytes(rgb, plots.DPI), 30), best_ms(pillow, 30)))

        fig, ax = _axes()

        def labels(stamp: bool) -> Callable[[], None]:
            def run() -> None:
                made = [
                    Label(ax, f"C +{i}%", (x, 100.0 * i), 6, plots.CANDIDATE, 7)
                    if stamp
                    else ax.annotate(
                        f"C +{i}%",
                        (x, 100.0 * i),
                        textcoords="offset points",
                        xytext=(0, 6),
                        ha="center",
                        fontsize=7,
                        color=plots.CANDIDATE,
                    )
                    for i, x in enumerate(XS)
                ]
                for a in made:
                    ax.draw_artist(a)
                for a in made:
                    a.remove()

            return run

        rows.append(("8 level labels", best_ms(labels(True), 30), best_ms(labels(False), 30)))
        ys = [100.0 * i + 50 for i in range(len(XS))]
        err = [[5.0] * len(XS), [7.0] * len(XS)]

        def side(new: bool) -> Callable[[], None]:
            def run() -> None:
                made = (
                    plots._series(ax, XS, ys, err, plots.CANDIDATE)
                    if new
                    else [ax.errorbar(XS, ys, yerr=err, color=plots.CANDIDATE, marker="o", ms=4, lw=1.6, capsize=3)]
                )
                for a in made:
                    a.remove()

            return run

        rows.append(("one side with error bars (created)", best_ms(side(True), 50), best_ms(side(False), 50)))
        title = fig.suptitle("", fontsize=11)
        titles = iter(range(10**9))

        def draw_title() -> None:
            title.set_text(
                f"allreduce-{next(titles)} (attempt 1): INCONCLUSIVE (no level differs beyond the noise floor)"
            )
            fig.draw_artist(title)

        rows.append(("the title (75 characters, drawn)", best_ms(draw_title, 50), None))
    print(f"plot costs: {len(exps)} plottable experiments of {args.n}; CPU ms per call, best of 3 passes")
    print("| step | now (ms) | the way before (ms) |")
    print("|---|---:|---:|")
    for name, now, before in rows:
        print(f"| {name} | {now:.1f} | {'-' if before is None else f'{before:.1f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
