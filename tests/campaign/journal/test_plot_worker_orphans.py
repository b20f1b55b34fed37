"""A kill -9 of the controller leaves no plot worker behind: the workers notice their
parent is gone and exit, so nothing holds the controller's stdout or memory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import os, sys, time
from campaign.journal import plot_worker
pool = plot_worker._get_pool()
pool.submit(os.getpid).result(timeout=120)  # the pool's workers are up
from multiprocessing import resource_tracker
pids = sorted(pool._processes) + [resource_tracker._resource_tracker._pid]
print(" ".join(str(p) for p in pids if p), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _controller(code: str) -> Iterator[subprocess.Popen[str]]:
    """A stand-in controller in its own process group, which is killed whatever happens."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_plot_workers_exit_when_the_controller_is_killed() -> None:
    with _controller(CHILD) as proc:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p in pids if _alive(p)] == []
        assert proc.stdout.read() == ""  # EOF: no orphan holds the controller's stdout


IDLE = """
import os, sys, time
from campaign.journal import plot_worker
pool = plot_worker._get_pool()
pool.submit(os.getpid).result(timeout=120)  # the workers are up, then idle on their queue
print("idle", flush=True)
try:
    time.sleep(600)
except KeyboardInterrupt:
    print("controller interrupted", flush=True)
"""


def test_ctrl_c_in_a_terminal_is_the_controllers_to_handle_not_the_plot_workers() -> None:
    """A terminal's Ctrl-C reaches the whole foreground process group.  The loop handles
    it (exit 130, one line); idle plot workers used to die of it too, each printing a
    KeyboardInterrupt traceback under that line."""
    with _controller(IDLE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "idle"
        time.sleep(1.0)  # the workers are back on their queue, waiting for work
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert out.strip() == "controller interrupted"
        assert proc.returncode == 0
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


LEAVE_NOW = """
import os, sys
from campaign.journal import plot_worker
pool = plot_worker._get_pool()
pool.submit(os.getpid).result(timeout=120)
print(" ".join(str(p) for p in pool._processes), flush=True)
plot_worker.cancel()
os._exit(130)  # what an interrupted `campaign run` does once its checkpoint is on disk
"""


def test_an_interrupted_run_that_leaves_at_once_leaves_no_worker_and_no_leak_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LEAVE_NOW],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 130
    assert "leaked" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert [p for p in map(int, done.stdout.split()) if _alive(p)] == []
