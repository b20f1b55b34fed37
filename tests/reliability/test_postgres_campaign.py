"""A campaign on PostgreSQL as a user runs it: `database:` a URL (the password in the
.pgpass), killed with SIGKILL of its whole process group mid-run (while it waits for a
server that a wrapper holds at its fifth launch), resumed with
CAMPAIGN_DATABASE_URL, finished with every record once; while it runs a second
controller of the same campaign is refused in one line (the advisory lock) and the
read-only commands answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.kill_watch import finished_experiments, ledger_live, read_only
from tests.campaign.sim_playbook import tiny_playbook, write_playbook
from tests.pgdb import fresh_database

ROOT = Path(__file__).resolve().parents[2]
HYPS = [
    {"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}},
    {"name": "fewer-channels", "env": {"NCCL_MIN_NCHANNELS": "2"}, "declares": ["NCCL_MIN_NCHANNELS"]},
    {"name": "chunked-prefill", "flags": {"chunked-prefill-size": 4096}},
]
#: the server command's wrapper: the fifth launch (of seven) waits (until the resume reaps it), so the
#: controller is surely mid-run, waiting for its server, while the test looks at it
HOLD = """n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$0.count"
if [ $n -eq 5 ]; then echo $$ > "$0.held"; while :; do sleep 1; done; fi
exec "$@"
"""

pytestmark = pytest.mark.slow


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **(env or {})},
    )


def _finished(url: str) -> int:
    con = read_only(url)
    try:
        return int(con.execute("SELECT count(*) FROM experiments WHERE status = 'finished'").fetchone()[0])
    except Exception:  # the tables are not there yet
        return 0
    finally:
        con.close()


def _stop_held(held: Path) -> None:
    try:
        os.killpg(int(held.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass  # gone already


def test_killed_resumed_and_finished_on_postgresql_with_one_controller(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with fresh_database() as url:
        hold = tmp_path / "hold.sh"
        hold.write_text(HOLD)
        data = tiny_playbook(tmp_path, "pg", HYPS, database=url)
        data["server"]["command"] = f"sh {hold} " + data["server"]["command"]
        pb = write_playbook(tmp_path / "playbook.yaml", data)
        run = subprocess.Popen(
            [sys.executable, "-m", "campaign.cli.main", "run", str(pb), "-q"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 240
            while not (tmp_path / "hold.sh.held").exists() and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert run.poll() is None and (tmp_path / "hold.sh.held").exists(), run.stdout.read() if run.stdout else ""
            assert _finished(url) >= 1  # the baseline at least: mid-run
            second = _cli(tmp_path, "run", str(pb), "-q")
            assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
            assert "already running" in second.stderr and "Traceback" not in second.stderr
            status = _cli(tmp_path, "status", "--json", env={"CAMPAIGN_DATABASE_URL": url})
            assert status.returncode == 0 and '"running"' in status.stdout  # read-only: no lock taken
            cid = status.stdout.split('"id": "')[1].split('"')[0]
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait(timeout=30)
            request.addfinalizer(lambda: _stop_held(tmp_path / "hold.sh.held"))  # reaped by the resume, else here
        before = _finished(url)
        resumed = _cli(tmp_path, "resume", cid, "-q", env={"CAMPAIGN_DATABASE_URL": url})
        assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stdout + resumed.stderr
        assert f"campaign {cid} finished" in resumed.stdout
        assert finished_experiments(url, [h["name"] for h in HYPS]) == []
        assert _finished(url) >= before + 1  # the resume went on from the kill, nothing finished was redone
        assert ledger_live(tmp_path / ".campaign" / "ledger.jsonl") == 0  # every server stopped
        journal = (tmp_path / "journal" / "pg.md").read_text()
        assert "| status | finished" in journal
        again = _cli(tmp_path, "resume", cid, "-q", env={"CAMPAIGN_DATABASE_URL": url})
        assert again.returncode == 2 and "is finished" in again.stderr
        # the password (in the .pgpass only) reached no output, journal, ledger or record
        password = Path(os.environ["PGPASSFILE"]).read_text().strip().split(":")[4]
        con = read_only(url)
        try:
            stored = repr(con.execute("SELECT * FROM campaigns").fetchall()) + repr(
                con.execute("SELECT * FROM events").fetchall()
            )
        finally:
            con.close()
        seen = [
            second.stderr,
            status.stdout,
            resumed.stdout,
            resumed.stderr,
            journal,
            stored,
            (tmp_path / ".campaign" / "ledger.jsonl").read_text(),
        ]
        assert not [s for s in seen if password in s]
