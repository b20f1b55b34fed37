"""Session-wide test setup."""

from __future__ import annotations

import signal

import pytest


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
