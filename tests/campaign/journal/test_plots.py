from __future__ import annotations

import math
import struct
from pathlib import Path

from campaign.domain.records import CampaignView
from campaign.journal.format import plot_workloads
from campaign.journal.plots import OVERVIEW_KEY, render_plots
from tests.campaign.seed_campaign import CID, seed_view

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plots_for_multi_level_experiments_and_overview(tmp_path):
    out = tmp_path / "journal" / "j.plots"
    made = render_plots(seed_view(), out)
    assert made == {f"{CID}/eagle3#2": "j.plots/exp-eagle3-2.png", OVERVIEW_KEY: "j.plots/campaign-overview.png"}
    for rel in made.values():
        path = tmp_path / "journal" / rel
        width, height = png_size(path)
        assert 300 <= width <= 1500 and 200 <= height <= 600
        assert 5_000 < path.stat().st_size < 300_000
    assert sorted(p.name for p in out.iterdir()) == ["campaign-overview.png", "exp-eagle3-2.png"]  # no temp files


def test_no_plot_for_failed_launches_or_single_level_runs(tmp_path):
    view = seed_view()
    crashed_and_single = [e for e in view.experiments if e.id != f"{CID}/eagle3#2"]
    made = render_plots(view.model_copy(update={"experiments": crashed_and_single}), tmp_path / "p")
    assert set(made) == {OVERVIEW_KEY}


def test_plots_are_deterministic(tmp_path):
    """Their speed is bench/scale.py's to measure (docs/benchmarks/scale.md), not a timed test's."""
    view = seed_view()
    first = render_plots(view, tmp_path / "a", relative_to=tmp_path)
    second = render_plots(view, tmp_path / "b", relative_to=tmp_path)
    for key in first:
        assert (tmp_path / first[key]).read_bytes() == (tmp_path / second[key]).read_bytes()


def test_empty_campaign_makes_no_plots(tmp_path):
    view = CampaignView(id="c", name="empty", status="running")
    assert render_plots(view, tmp_path / "p") == {}


def test_a_reused_frame_draws_exactly_what_a_new_figure_draws(tmp_path):
    """`draw_experiment` keeps a figure per layout and swaps each experiment's data in;
    nothing of the experiment drawn before may stay (lines, labels, limits, title)."""
    from campaign.journal.plots import _FRAMES, draw_experiment, experiment_figure, save_figure

    exp = next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")
    other = exp.model_copy(
        update={
            "hypothesis": "another-idea",
            "attempt": 2,
            "rows": [
                r.model_copy(
                    update={
                        "candidate": (r.candidate or 0) * 3,
                        "baseline": (r.baseline or 0) * 0.5,
                        "comparison": None,
                    }
                )
                for r in exp.rows
            ],
        }
    )
    workloads = plot_workloads(exp)
    _FRAMES.clear()
    save_figure(experiment_figure(exp, workloads), tmp_path / "new.png")
    draw_experiment(exp, workloads, tmp_path / "first.png")
    draw_experiment(other, workloads, tmp_path / "other.png")
    draw_experiment(exp, workloads, tmp_path / "again.png")
    assert len(_FRAMES) == 1  # one layout: the frame was reused
    (frame,) = _FRAMES.values()
    assert len(frame.kept) == 2  # two y axes kept as pixels; "again" drew on the first one's
    new = (tmp_path / "new.png").read_bytes()
    assert (tmp_path / "first.png").read_bytes() == new
    assert (tmp_path / "again.png").read_bytes() == new
    assert (tmp_path / "other.png").read_bytes() != new


def test_y_limits_are_round_and_leave_room_for_the_labels():
    """The frame keeps one background per set of y limits: they must be round numbers (a
    handful per campaign), at least 15% above the highest point and not much more."""
    from campaign.journal.plots import _NICE, y_top

    assert y_top(0) == 1.0
    for top in (0.003, 0.87, 1, 7.9, 82.0, 99.9, 100, 869.6, 870, 4123.5, 7712, 65432.1):
        limit = y_top(top)
        assert top * 1.15 <= limit <= top * 1.15 * 1.25 + 1e-9, (top, limit)
        mantissa = limit / 10 ** math.floor(math.log10(limit) + 1e-12)
        assert any(abs(mantissa - step) < 1e-9 for step in _NICE), (top, limit)
    assert len({y_top(3800 + k) for k in range(400)}) <= 2  # nearby experiments share an axis


def test_a_plot_file_holds_the_canvas_pixels_and_its_dpi(tmp_path):
    """The PNG is written by `png_bytes`, not Pillow: Pillow (a decoder written by others)
    must read back every pixel the canvas drew, and the dpi."""
    import numpy as np
    from PIL import Image

    from campaign.journal.plots import DPI, experiment_figure, save_figure

    exp = next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")
    fig = experiment_figure(exp, plot_workloads(exp))
    save_figure(fig, tmp_path / "p.png")
    want = np.asarray(fig.canvas.buffer_rgba())[..., :3]  # type: ignore[attr-defined]
    with Image.open(tmp_path / "p.png") as im:
        im.load()
        assert im.mode == "RGB" and im.size == (want.shape[1], want.shape[0])
        assert round(im.info["dpi"][0]) == DPI
        got = np.asarray(im)
    assert got.shape == want.shape and (got == want).all()
    assert len({tuple(px) for px in want.reshape(-1, 3)[::97]}) > 20  # a real plot, not a blank canvas


def test_png_bytes_round_trips_odd_sizes_and_every_byte_value(tmp_path):
    import numpy as np
    from PIL import Image

    from campaign.journal.plots import png_bytes

    rng = np.random.default_rng(3)
    for h, w in ((1, 1), (7, 13), (256, 3)):
        rgb = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        (tmp_path / "x.png").write_bytes(png_bytes(rgb, 72))
        with Image.open(tmp_path / "x.png") as im:
            assert (np.asarray(im.convert("RGB")) == rgb).all()


def test_a_side_looks_as_errorbar_drew_it(tmp_path, monkeypatch):
    """Each side is drawn by `plots._series` (a line, bars and caps), not by `errorbar`
    (twice its cost): the pixels must be those of the errorbar call it replaced, with
    error bars (a candidate with comparisons) and without (the baseline; a candidate
    without comparisons)."""
    from campaign.journal import plots
    from campaign.journal.plots import experiment_figure, save_figure

    exp = next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")
    bare = exp.model_copy(update={"rows": [r.model_copy(update={"comparison": None}) for r in exp.rows]})
    calls = []

    def errorbar(ax, xs, ys, err, color):  # the earlier code
        calls.append(err is not None)
        return [ax.errorbar(xs, ys, yerr=err, color=color, marker="o", ms=4, lw=1.6, capsize=3)]

    for view in (exp, bare):
        save_figure(experiment_figure(view, plot_workloads(view)), tmp_path / "now.png")
        with monkeypatch.context() as m:
            m.setattr(plots, "_series", errorbar)
            save_figure(experiment_figure(view, plot_workloads(view)), tmp_path / "before.png")
        assert (tmp_path / "now.png").read_bytes() == (tmp_path / "before.png").read_bytes()
    assert True in calls and False in calls


def test_a_stamped_label_looks_as_annotate_draws_it():
    """Level labels are stamped from pixels rendered once (`plot_labels`); matplotlib's
    own `annotate` is the reference: the same ink, at the same place to about half a pixel."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from campaign.journal.plot_labels import Label

    def draw(stamp: bool):
        fig = Figure(figsize=(5.2, 3.9), dpi=90)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        ax.set_xscale("log")
        ax.set_xlim(0.7, 350)
        ax.set_ylim(0, 10_000)
        ax.set_axis_off()  # only the labels' ink
        for i, x in enumerate((1, 2, 5, 10, 30, 70, 100, 250)):
            text, color = (f"C +{i}%", "#1f77b4") if i % 2 else (f"B +{10 * i}%", "#7f7f7f")
            if stamp:
                Label(ax, text, (x, 1000.0 * i + 333), 6, color, 7)
            else:
                ax.annotate(
                    text,
                    (x, 1000.0 * i + 333),
                    textcoords="offset points",
                    xytext=(0, 6),
                    ha="center",
                    fontsize=7,
                    color=color,
                )
        fig.canvas.draw()
        return 255 - np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(float)  # ink

    ref, got = draw(False), draw(True)
    assert got.sum() > 0 and abs(got.sum() - ref.sum()) < 0.02 * ref.sum()  # the same amount of ink
    for axis in (0, 1):  # the same place: ink profiles along each axis within half a pixel
        other = 1 - axis
        w_ref, w_got = ref.sum(axis=(other, 2)), got.sum(axis=(other, 2))
        spans = np.flatnonzero(w_ref > 0)
        assert set(np.flatnonzero(w_got > 0)) <= set(range(spans.min() - 1, spans.max() + 2))
    # label by label: each label's ink centre where annotate puts it
    bands = _bands(ref)
    assert len(bands) == 8
    for y0, y1 in bands:
        for a in (ref, got):
            assert a[y0:y1].sum() > 0
        cy = [(a[y0:y1].sum(axis=(1, 2)) * np.arange(y0, y1)).sum() / a[y0:y1].sum() for a in (ref, got)]
        cx = [(a[y0:y1].sum(axis=(0, 2)) * np.arange(a.shape[1])).sum() / a[y0:y1].sum() for a in (ref, got)]
        # a stamp lands on whole pixels (up to 0.5 px off); a glyph drawn at a fraction of a
        # pixel is antialiased a little differently (0.42 px at most here, matplotlib 3.11)
        assert abs(cy[0] - cy[1]) <= 0.6 and abs(cx[0] - cx[1]) <= 0.6, (y0, cx, cy)


def _bands(ink):
    """Row ranges holding one label each (rows with ink, split by gaps)."""
    import numpy as np

    rows = ink.sum(axis=(1, 2)) > 0
    out, start = [], None
    for i, on in enumerate(np.append(rows, False)):
        if on and start is None:
            start = i
        elif not on and start is not None:
            out.append((start, i))
            start = None
    return out
