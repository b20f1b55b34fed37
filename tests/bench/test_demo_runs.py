"""What `bench/demo_runs.py` counts as the seeds' story after CUDA 13 (no campaign run:
the attempts as `campaign show --json` gives them)."""

from __future__ import annotations

import pytest

from bench.demo_runs import _final_problems, main


def _attempts(single: dict[str, object], sweep_winner: str = "baseline") -> dict[str, list[dict[str, object]]]:
    wins = {name: [{"verdict": "win"}] for name in ("flashinfer-allreduce-fusion", "torch-symm-mem")}
    eagle = {
        "verdict": "dead_end",
        "reason": "slower",
        "metrics": {
            "single_stream": {"1": single},
            "parallel": {str(c): {"delta_pct": -20.0, "winner": sweep_winner} for c in (1, 10, 100)},
        },
    }
    return {**wins, "eagle3": [eagle]}


def test_eagle3_must_be_shown_to_win_the_single_stream_not_only_measure_faster():
    # run 6 of the 10-run count: +1.1% single stream, no winner; it was counted as the story
    bad, figure = _final_problems(_attempts({"delta_pct": 1.1, "winner": "tie"}))
    assert figure == "+1.1%" and bad and "eagle3" in bad[0]
    bad, _ = _final_problems(_attempts({"delta_pct": 5.5, "winner": "candidate"}))
    assert bad == []
    bad, _ = _final_problems(_attempts({"delta_pct": 5.5, "winner": "candidate"}, sweep_winner="tie"))
    assert bad and "eagle3" in bad[0]


def test_no_runs_is_refused_not_counted(capsys):
    """`--runs 0` printed "0 of 0 runs told the seeds' story" and exit 0."""
    with pytest.raises(SystemExit) as e:
        main(["--runs", "0"])
    assert e.value.code == 2 and "--runs" in capsys.readouterr().err


def test_keep_refuses_a_directory_that_already_holds_a_run(tmp_path, capsys):
    """`--keep DIR` must not mix a new count's runs with an earlier count's databases."""
    (tmp_path / "run-2").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["--runs", "3", "--keep", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "run-2" in err and "--keep" in err
