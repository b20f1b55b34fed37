"""The experiment plot: a throughput panel for every workload measured, and a Pareto
panel (per user against total throughput, points labelled with C) for each sweep."""

from __future__ import annotations

import struct
from pathlib import Path

from campaign.journal.format import plot_workloads
from campaign.journal.pareto import pareto_points
from campaign.journal.plot_labels import Label
from campaign.journal.plots import draw_experiment, experiment_figure
from tests.campaign.seed_campaign import BASE_PARALLEL, CID, EAGLE_PARALLEL, PARALLEL_C, seed_view


def _eagle3():  # single_stream at C=1 and the parallel sweep C=1..250
    return next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")


def test_every_workload_gets_a_throughput_panel_and_each_sweep_a_pareto_panel() -> None:
    exp = _eagle3()
    fig = experiment_figure(exp, plot_workloads(exp))
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split()[0] for t in titles] == ["single_stream", "parallel", "parallel:"]
    pareto = fig.axes[2]
    assert pareto.get_xlabel() == "total throughput (tok/s, node time)" and pareto.get_yscale() == "log"
    lines = pareto.get_lines()
    assert [list(line.get_xdata()) for line in lines] == [EAGLE_PARALLEL, BASE_PARALLEL]
    assert list(lines[0].get_ydata()) == [t / c for t, c in zip(EAGLE_PARALLEL, PARALLEL_C)]
    labels = [a.text for a in pareto.artists if isinstance(a, Label)]
    assert labels == [str(c) for c in PARALLEL_C] * 2  # every point of both sides names its C


def test_pareto_points_are_total_and_total_over_c() -> None:
    rows = [r for r in _eagle3().rows if r.workload == "parallel"]
    assert pareto_points(rows, "baseline")[2] == (BASE_PARALLEL[2], BASE_PARALLEL[2] / 5, 5)


def test_the_plot_is_at_least_900_px_wide(tmp_path: Path) -> None:
    exp = _eagle3()
    draw_experiment(exp, plot_workloads(exp), tmp_path / "p.png")
    width, height = struct.unpack(">II", (tmp_path / "p.png").read_bytes()[16:24])
    assert width >= 900 and height >= 300
