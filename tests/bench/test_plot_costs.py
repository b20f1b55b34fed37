"""`bench/plot_costs.py` runs and prints a row for every step it measures."""

from __future__ import annotations

from bench import plot_costs


def test_the_plot_cost_bench_prints_every_step(capsys):
    assert plot_costs.main(["--n", "8"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| step")]
    assert [r.split(" | ")[0][2:] for r in rows] == [
        "draw_experiment (the whole plot)",
        "PNG of one plot",
        "8 level labels",
        "one side with error bars (created)",
        "the title (75 characters, drawn)",
    ]
    for r in rows:
        now = float(r.split(" | ")[1])
        assert 0 < now < 1000, r
