"""Local-only guarantees: handles outlive the controller, recycled pids are never killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from campaign.domain.models import ProcessHandle
from tools.executors import procinfo
from tools.executors.local import UNKNOWN_STATUS, LocalExecutor

REPO = Path(__file__).resolve().parents[3]

CONTROLLER = """
import json, os, sys
sys.path.insert(0, {repo!r})
from tools.executors.local import LocalExecutor
ex = LocalExecutor()
h = ex.start(["sh", "-c", "sleep 300 & sleep 300"], log_path={log!r})
print(h.model_dump_json(), flush=True)
os.kill(os.getpid(), 9)  # the controller dies without cleaning up
"""


def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_fresh_executor_stops_group_left_by_a_dead_controller(tmp_path: Path) -> None:
    script = CONTROLLER.format(repo=str(REPO), log=str(tmp_path / "orphan.log"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == -9
    handle = ProcessHandle.model_validate(json.loads(out.stdout))
    assert procinfo.live_members(handle.pgid)  # the orphans are still there

    fresh = LocalExecutor()
    assert fresh.poll(handle) is None
    fresh.stop(handle, grace_s=2.0)
    assert procinfo.live_members(handle.pgid) == set()
    assert fresh.poll(handle) == UNKNOWN_STATUS


def test_stop_never_kills_a_stranger_with_a_recycled_pid(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        forged = ProcessHandle(
            executor="local",
            pid=stranger.pid,
            pgid=stranger.pid,
            log_path=str(tmp_path / "old.log"),
            started_at=time.time() - 3600,
        )
        LocalExecutor().stop(forged, grace_s=0.5)
        assert stranger.poll() is None
        assert LocalExecutor().poll(forged) == UNKNOWN_STATUS  # not ours: not reported running
    finally:
        stranger.kill()
        stranger.wait()


def test_start_time_identifies_a_tokenless_leader(tmp_path: Path) -> None:
    """A group whose members lost the token (env -i) is still recognised by the
    leader's start time."""
    before = time.time()
    proc = subprocess.Popen(["env", "-i", "sleep", "300"], start_new_session=True)
    try:
        handle = ProcessHandle(
            executor="local", pid=proc.pid, pgid=proc.pid, log_path=str(tmp_path / "x.log"), started_at=before
        )
        LocalExecutor().stop(handle, grace_s=2.0)
        _wait(lambda: proc.poll() is not None)
        assert proc.returncode == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_read_log_never_splits_a_character(tmp_path: Path) -> None:
    log = tmp_path / "utf8.log"
    data = "héllo €\n".encode()
    log.write_bytes(data[:-3])  # cut in the middle of the euro sign
    handle = ProcessHandle(executor="local", log_path=str(log))
    ex = LocalExecutor()
    text, offset = ex.read_log(handle, 0)
    assert text == "héllo " and offset == len("héllo ".encode())
    log.write_bytes(data)
    rest, end = ex.read_log(handle, offset)
    assert rest == "€\n" and end == len(data)


def test_handle_records_a_redacted_command(tmp_path: Path) -> None:
    ex = LocalExecutor()
    handle = ex.start(["sh", "-c", "true", "--api-key", "sk-abcdefghijklmnopqrstu"], log_path=str(tmp_path / "l.log"))
    ex.stop(handle, grace_s=1.0)
    assert "sk-abcdefghijklmnopqrstu" not in handle.command
    assert "--api-key" in handle.command


def test_close_forgets_finished_children(tmp_path: Path) -> None:
    ex = LocalExecutor()
    handle = ex.start(["true"], log_path=str(tmp_path / "t.log"))
    _wait(lambda: ex.poll(handle) is not None)
    ex.close()
    assert ex.poll(handle) == UNKNOWN_STATUS
    assert os.path.exists(handle.log_path)
