"""Kill the controller anywhere (SIGKILL at random and targeted moments, SIGTERM and
SIGINT), resume, and check nothing was lost, duplicated or left running: the
`bench/kill_anywhere.py` harness, run for real.  Both are slow (CI runs them): the
first runs >= 20 trials over every moment, the second two trials at the moments that
broke resumes before (right after a record, mid-sweep)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, trials: int, seed: int, moments: str | None = None) -> dict:
    out = tmp_path / "trials.json"
    args = [
        sys.executable,
        str(ROOT / "bench" / "kill_anywhere.py"),
        "--trials",
        str(trials),
        "--seed",
        str(seed),
        "--json",
        str(out),
    ]
    if moments:
        args += ["--moments", moments]
    res = subprocess.run(
        args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True, capture_output=True, timeout=3000
    )
    print(res.stdout[-6000:])
    assert out.exists(), res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads(out.read_text())
    failed = [t for t in data["trials"] if not t["ok"]]
    assert not failed, "\n".join(f"{t['moment']} #{t['target']}: {t['problems']}" for t in failed)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    return data


EXHAUSTIVE = pytest.mark.skipif(
    os.environ.get("CAMPAIGN_EXHAUSTIVE") != "1",
    reason="whole campaigns killed and resumed by the bench (7-12 min a trial on 2 shared cores): "
    "CAMPAIGN_EXHAUSTIVE=1 runs them; CI runs the exact windows in test_kill_points.py",
)


@EXHAUSTIVE
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_kill_anywhere_many_trials(tmp_path: Path) -> None:
    trials = int(os.environ.get("KILL_ANYWHERE_TRIALS", "21"))
    data = _run(tmp_path, trials, seed=int(os.environ.get("KILL_ANYWHERE_SEED", "11")))
    assert len(data["trials"]) == trials >= 7
    hit = [t for t in data["trials"] if t["hit"]]
    assert len(hit) >= trials * 2 // 3, "too few trials were interrupted at their moment"
    assert {t["moment"] for t in hit} >= {
        "server_start",
        "mid_sweep",
        "after_record",
        "journal_write",
        "sigterm",
        "sigint",
        "launch",
        "window",
        "finish",
        "review_gate",
    }
    summary = data["summary"]
    assert summary["unledgered_servers"] == summary["temp_files_left"] == summary["redone_finished_rounds"] == 0
    assert sum(t["orphans"] for t in data["trials"]) >= 1  # some kill left a server behind, and resume reaped it


@EXHAUSTIVE
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_kill_during_record_and_mid_sweep_then_resume(tmp_path: Path) -> None:
    data = _run(tmp_path, 2, seed=5, moments="after_record,mid_sweep")
    assert [t["moment"] for t in data["trials"]] == ["after_record", "mid_sweep"]
    assert all(t["hit"] for t in data["trials"])
