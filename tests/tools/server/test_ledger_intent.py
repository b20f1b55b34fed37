"""The ledger knows a server before it exists: the launch writes its intent (command,
log path, a token placed in the server's environment) before the spawn and the pid
right after, and the reaper finds a server known only by its intent through the token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from campaign.domain.killpoint import KILL_ENV
from tools.executors import procinfo
from tools.executors.base import LAUNCH_TOKEN_ENV
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchRequest, ServerLauncher
from tools.server.ledger import ProcessLedger

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import sys
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchRequest, ServerLauncher
from tools.server.ledger import ProcessLedger
ex = LocalExecutor()
port = ex.free_port()
req = LaunchRequest(argv=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                    log_path=sys.argv[2], port=port, health_path="/", poll_interval_s=0.1, startup_timeout_s=30)
with ServerLauncher(ex, ledger=ProcessLedger(sys.argv[1])).launch(req):
    pass
"""


def _alive(pid: int) -> bool:
    return procinfo.is_running(pid)


class _Spy(LocalExecutor):
    """Reads the ledger at the moment of the spawn."""

    def __init__(self, ledger: ProcessLedger) -> None:
        super().__init__()
        self.ledger, self.seen = ledger, None

    def start(self, argv, *, log_path, env=None, cwd=None):
        self.seen = (self.ledger.intents(), dict(env or {}))
        return super().start(argv, log_path=log_path, env=env, cwd=cwd)


def test_intent_with_token_is_written_before_the_spawn(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    ex = _Spy(ledger)
    port = ex.free_port()
    req = LaunchRequest(
        argv=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        log_path=str(tmp_path / "s.log"),
        port=port,
        health_path="/",
        poll_interval_s=0.1,
        startup_timeout_s=30,
    )
    with ServerLauncher(ex, ledger=ledger).launch(req) as server:
        intents, env = ex.seen
        assert len(intents) == 1 and env[LAUNCH_TOKEN_ENV] == intents[0]
        assert ledger.intents() == [] and [h.pid for h in ledger.live()] == [server.handle.pid]  # pid replaced it
    assert ledger.live() == [] and ledger.intents() == []


def test_server_spawned_before_its_pid_is_ledgered_is_reaped_by_token(tmp_path: Path) -> None:
    ledger_path = tmp_path / "ledger.jsonl"
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(ledger_path), str(tmp_path / "s.log")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), KILL_ENV: "launch:spawned"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr[-1500:]
    ledger = ProcessLedger(ledger_path)
    assert ledger.live() == [] and len(ledger.intents()) == 1  # the controller died before the pid
    found = LocalExecutor().find_by_token(ledger.intents()[0], log_path=str(tmp_path / "s.log"), host="127.0.0.1")
    assert len(found) == 1 and _alive(found[0].pid)  # a server no handle points at: parent pid 1
    try:
        reaped = ledger.reap(lambda _h: LocalExecutor(), grace_s=2)
        assert [h.pid for h in reaped] == [found[0].pid]
        deadline = time.monotonic() + 5
        while _alive(found[0].pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(found[0].pid)
        assert ledger.live() == [] and ledger.intents() == []
    finally:
        if _alive(found[0].pid):
            os.killpg(found[0].pid, signal.SIGKILL)


def test_an_intent_whose_spawn_never_happened_is_dropped(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    ledger.intend("0" * 32, executor="local", host="127.0.0.1", log_path=str(tmp_path / "s.log"))
    ledger._append(
        {
            "op": "intent",
            "key": "intent|x",
            "token": "x",
            "handle": {"executor": "local"},
            "owner": {"pid": 1, "started": "not-init"},
        }
    )  # an owner that is gone
    assert ledger.reap(lambda _h: LocalExecutor(), grace_s=1) == []
    assert ledger.intents() == []
