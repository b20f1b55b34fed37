"""Session-wide test setup."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgdb import backend_db  # noqa: F401  (a fixture: SQLite and PostgreSQL, every test that asks)
from tools.executors.registry import install_node_kinds

# tests are a composition root too: a playbook read without the CLI knows every node kind
install_node_kinds()

# the tests whose assertions read the machine's speed: a real vLLM server (its verdicts
# and timeouts) and the load generator's timing checks.  Under pytest-xdist they hold the
# CPU alone (`_cpu_turn`).
EXCLUSIVE_MARKERS = ("realengine", "exclusive")


def pytest_configure() -> None:
    """A shell without job control starts a background command (`pytest ... &`) with SIGINT
    ignored, and every process it starts inherits that: the tests that press Ctrl-C on a
    `campaign` command would then find it deaf to it (as it should be, started that way).
    Restore the default, so their commands start as from a terminal however pytest ran."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n`, `--dist loadgroup`), tests that share one daemon or eat the
    whole CPU run in turn on one worker: the real vLLM tests (each server takes both cores,
    and their verdicts read its speed) and the cluster tests (one Slurm node, whose queue
    some of them require empty).  Everything else spreads over the workers; most of it
    waits on servers and subprocesses rather than computing."""
    for item in items:
        if item.get_closest_marker("realengine"):
            item.add_marker(pytest.mark.xdist_group("vllm"))
        elif item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.xdist_group("cluster"))


def _lock(path: Path, mode: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under pytest-xdist, a test marked realengine or exclusive runs with no other test
    running on any worker, as in a serial run: the other workers' tests would take the CPU
    its figures and time limits read (3 workers share 2 cores).  A turnstile of two file
    locks shared by the run's workers: every test holds the `cpu` lock shared for its whole
    protocol (setup, call, teardown), an exclusive test holds it alone; the exclusive one
    first takes the `gate`, which every test passes on its way in, so the tests that keep
    arriving on the other workers wait behind it instead of starving it.  The wait comes
    before pytest-timeout's timer starts (tryfirst: this wrapper is outside its own).
    Without xdist (`-n 0`) nothing is locked."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    base = Path(tempfile.gettempdir()) / f"campaign-pytest-{run}"
    exclusive = any(item.get_closest_marker(m) for m in EXCLUSIVE_MARKERS)
    gate = _lock(base.with_suffix(".gate"), fcntl.LOCK_EX)
    try:
        cpu = _lock(base.with_suffix(".cpu"), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        if not exclusive:
            os.close(gate)
    try:
        yield
    finally:
        os.close(cpu)
        if exclusive:
            os.close(gate)
