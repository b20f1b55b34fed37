"""Two controllers on one campaign: the second refuses (CampaignLocked, exit 2, one
line), touches nothing of the first (its server keeps serving), and readers
(`campaign status`, `campaign show`) answer at once while the first one writes.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench.kill_anywhere import write_playbook
from bench.kill_watch import TAG_ENV, Watch, finished_experiments

ROOT = Path(__file__).resolve().parents[2]
HYPS = [
    {"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}},
    {"name": "custom-allreduce", "flags": {"enable-custom-all-reduce": True}},
]


def _alive(pid: int) -> bool:
    """Running (a zombie is dead: its stopped parent has not waited for it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: str(tmp_path), "NO_COLOR": "1", "COLUMNS": "200"}


def _cli(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=tmp_path,
        env=_env(tmp_path),
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def test_second_controller_refused_first_untouched_readers_never_wait(tmp_path: Path) -> None:
    pb = write_playbook(tmp_path, HYPS, review_after=None)  # one uninterrupted run
    db = tmp_path / "state" / "campaign.db"
    first = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db", str(db), "-q"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        watch = Watch(first.pid, db, tmp_path / "journal")
        assert watch.until(lambda: watch.server_count() >= 2 and watch.newest_server_serving(), first), (
            "the first controller ended before its second server served"
        )
        server_pid = list(watch.servers)[-1]
        cid = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT id FROM campaigns").fetchone()[0]

        # freeze the first controller while its server serves: the refusals below then
        # run at a known moment, and its server must survive them
        os.kill(first.pid, signal.SIGSTOP)
        try:
            for args in (["run", str(pb), "--db", str(db)], ["resume", cid, "--db", str(db), "--approve"]):
                res = _cli(tmp_path, *args)
                lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
                assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
                assert len(lines) == 1 and "already running" in lines[0] and f"pid {first.pid}" in lines[0], lines
                assert _alive(server_pid), f"`campaign {args[0]}` killed the running server"
        finally:
            os.kill(first.pid, signal.SIGCONT)

        t0 = time.monotonic()
        status = _cli(tmp_path, "status", "--db", str(db), "--json")
        show = _cli(tmp_path, "show", cid, "--db", str(db), "--json")
        elapsed = time.monotonic() - t0
        assert status.returncode == 0 and '"status": "running"' in status.stdout, status.stderr
        assert show.returncode == 0 and cid in show.stdout, show.stderr
        assert elapsed < 20, f"readers took {elapsed:.1f}s while the campaign ran"
        out, _ = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, out
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    assert finished_experiments(db, [h["name"] for h in HYPS]) == []
    # nothing failed because a server vanished under the first controller
    con = sqlite3.connect(db)
    failed = con.execute("SELECT hypothesis, failure_json FROM experiments WHERE status = 'failed'").fetchall()
    con.close()
    assert failed == [], failed
