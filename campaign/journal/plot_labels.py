"""Small text labels on a plot, drawn from pixels rendered once per distinct label.

An experiment's plot labels every level a side wins ("C +3%", "B +12%"): up to 16 labels a
plot, and matplotlib lays out and rasterizes every glyph of every label at each draw
(about 2 ms a label, a third of a plot's cost in a 1,000-experiment journal).  A campaign
has a few hundred distinct labels, so each is rendered once by matplotlib itself (same
font, size, colour and antialiasing as `Axes.annotate`) onto a transparent canvas, and
its pixels are stamped at each place it appears: 0.2 ms a label.  A stamp lands on whole
pixels, so a label may sit up to half a pixel from where `annotate` puts it
(`tests/campaign/journal/test_plots.py` holds the two side by side).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["Label", "label_pixels"]

_CANVAS_IN = (4.0, 1.0)  # inches: wide enough for any label at the sizes used


@lru_cache(maxsize=1024)
def label_pixels(text: str, color: str, fontsize: float, dpi: float) -> tuple[Any, float, float]:
    """(RGBA rows bottom-up, dx, dy): the label's rendered pixels, and where their lower
    left corner lies from the anchor (the text's centre on its baseline), in pixels."""
    fig = Figure(figsize=_CANVAS_IN, dpi=dpi)
    canvas: Any = FigureCanvasAgg(fig)  # matplotlib's Agg methods are untyped
    fig.patch.set_alpha(0.0)
    width, height = fig.bbox.width, fig.bbox.height
    x0, y0 = round(width / 2), round(height / 3)
    fig.text(x0 / width, y0 / height, text, fontsize=fontsize, color=color, ha="center", va="baseline")
    canvas.draw()
    buf = np.asarray(canvas.buffer_rgba())
    ys, xs = np.nonzero(buf[..., 3])
    if not len(ys):
        return np.zeros((0, 0, 4), dtype=np.uint8), 0.0, 0.0
    top, bottom, left, right = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    pixels = np.ascontiguousarray(buf[top:bottom, left:right][::-1])
    return pixels, left - x0, (buf.shape[0] - bottom) - y0


class Label(Artist):
    """A label centred above a data point (`xy`), `offset_pt` points higher, as
    `ax.annotate(text, xy, textcoords="offset points", xytext=(0, offset_pt),
    ha="center")` draws it (module doc)."""

    zorder = 3  # a Text's: above lines and markers

    def __init__(
        self, ax: Any, text: str, xy: tuple[float, float], offset_pt: float, color: str, fontsize: float
    ) -> None:
        super().__init__()
        self.text, self.xy, self.offset_pt, self.color, self.fontsize = text, xy, offset_pt, color, fontsize
        ax.add_artist(self)

    def draw(self, renderer: Any) -> None:
        if not self.get_visible() or self.axes is None:
            return
        pixels, dx, dy = label_pixels(self.text, self.color, self.fontsize, renderer.dpi)
        if not pixels.size:
            return
        x, y = self.axes.transData.transform(self.xy)
        y += self.offset_pt * renderer.dpi / 72.0
        gc = renderer.new_gc()
        renderer.draw_image(gc, round(x + dx), round(y + dy), pixels)
        gc.restore()
        self.stale = False
