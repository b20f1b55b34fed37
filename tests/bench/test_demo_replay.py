"""`bench/demo_replay.py`: the demo's WINs, their truth from the simulated node's model."""

from __future__ import annotations

from bench.demo_replay import main, true_effects


def test_the_cuda13_wins_gain_the_single_stream_and_little_at_the_sweeps_top():
    cases = true_effects()
    assert set(cases) == {"smaller-cuda-graph", "flashinfer-allreduce-fusion", "torch-symm-mem"}
    for name in ("flashinfer-allreduce-fusion", "torch-symm-mem"):
        eff = cases[name].effects
        assert eff[("single_stream", 1)] > 8.0  # the win
        assert all(0.0 < eff[("parallel", c)] < 2.0 for c in (70, 100, 250))  # near the no-loss margin's side


def test_the_replay_prints_one_row_per_policy(capsys):
    assert main(["--runs", "2", "--repeats-max", "6"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| adaptive") or line.startswith("| fixed")]
    assert [r.split(" | ")[0] for r in rows] == ["| adaptive, repeats.max 6", "| fixed 6 rounds"]
    assert "1.45x m above the no-loss margin" in out


def test_a_bad_repeats_max_is_one_line_and_exit_2(capsys):
    import pytest

    for bad in ("x", "1"):
        with pytest.raises(SystemExit) as got:
            main(["--runs", "1", "--repeats-max", bad])
        assert got.value.code == 2
        assert ": error: --repeats-max:" in capsys.readouterr().err.splitlines()[-1]
