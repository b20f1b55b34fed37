from __future__ import annotations

import time
from pathlib import Path

from campaign.domain.models import ProcessHandle
from tools.executors import procinfo
from tools.executors.local import LocalExecutor
from tools.server.ledger import ProcessLedger


def _handle(pid: int) -> ProcessHandle:
    return ProcessHandle(executor="ssh", host="gpu-1", pid=pid, pgid=pid, started_at=time.time())


class _Unreachable:
    def stop(self, handle, *, grace_s=10.0):
        raise ConnectionError("node down")


def test_live_is_started_minus_stopped_and_survives_torn_lines(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "runs" / "ledger.jsonl")
    a, b = _handle(100), _handle(200)
    ledger.record(a)
    ledger.record(b)
    ledger.remove(a)
    with open(ledger.path, "a") as f:
        f.write('{"op":"start","key":"torn')  # a crash mid-write
    assert ProcessLedger(ledger.path).live() == [b]


def test_reap_keeps_what_could_not_be_stopped(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    ledger.record(_handle(300))
    assert ledger.reap(lambda h: _Unreachable()) == []
    assert [h.pid for h in ledger.live()] == [300]


def test_reap_stops_real_groups_and_compacts(tmp_path: Path) -> None:
    ex = LocalExecutor()
    handle = ex.start(["sh", "-c", "sleep 300 & sleep 300"], log_path=str(tmp_path / "s.log"))
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    ledger.record(handle)
    assert ledger.reap(lambda h: LocalExecutor(), grace_s=1.0) == [handle]
    assert procinfo.live_members(handle.pgid) == set()
    assert ledger.path.read_text() == ""
    ex.stop(handle)
