"""The run ledger reaps only servers whose controller is gone: a second controller
(refused by the run lock, or running another campaign beside the first) never stops
a live controller's server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tools.executors.local import LocalExecutor
from tools.server.ledger import ProcessLedger

ROOT = Path(__file__).resolve().parents[2]

OWNER = """
import sys, time
from tools.executors.local import LocalExecutor
from tools.server.ledger import ProcessLedger
ex = LocalExecutor()
h = ex.start(["sleep", "300"], log_path=sys.argv[2])
ProcessLedger(sys.argv[1]).record(h)
print(h.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def test_live_owner_kept_dead_owner_reaped(tmp_path: Path) -> None:
    ledger_path = tmp_path / "ledger.jsonl"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(ledger_path), str(tmp_path / "s.log")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        server = int(owner.stdout.readline())
        ledger = ProcessLedger(ledger_path)
        assert ledger.reap(lambda h: LocalExecutor(), grace_s=1) == []
        assert _alive(server) and len(ledger.live()) == 1  # kept, with its owner, for a later reap
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        reaped = ledger.reap(lambda h: LocalExecutor(), grace_s=1)
        assert [h.pid for h in reaped] == [server]
        deadline = time.monotonic() + 5
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server) and ledger.live() == []
    finally:
        owner.kill()
        owner.wait()


def test_entries_without_owner_are_leftovers(tmp_path: Path) -> None:
    """A ledger written before owners were recorded: every entry is reaped as before."""
    ex = LocalExecutor()
    h = ex.start(["sleep", "300"], log_path=str(tmp_path / "s.log"))
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    ledger._append({"op": "start", "key": "k", "handle": h.model_dump(mode="json")})
    assert [x.pid for x in ledger.reap(lambda _h: ex, grace_s=1)] == [h.pid]
    assert ex.poll(h) is not None
