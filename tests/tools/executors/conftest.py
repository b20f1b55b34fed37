"""The executor registry the contract suite runs over.

To add an executor kind: write a factory `make_<kind>(tmp_path) -> Executor` that
returns a ready executor for a node reachable from this machine, add it to
`EXECUTOR_FACTORIES`, and list the marks it needs in `EXECUTOR_MARKS` (kinds that
need the loopback sshd or the local Slurm cluster are marked `cluster`).  Every test
in `test_contract.py` then runs against it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tools.executors.base import Executor
from tools.executors.local import LocalExecutor
from tools.models import ProcessHandle


def make_local(tmp_path: Path) -> Executor:
    return LocalExecutor()


EXECUTOR_FACTORIES: dict[str, Callable[[Path], Executor]] = {"local": make_local}
EXECUTOR_MARKS: dict[str, list[pytest.MarkDecorator]] = {"local": []}


@pytest.fixture(params=[pytest.param(name, marks=EXECUTOR_MARKS.get(name, []), id=name)
                        for name in EXECUTOR_FACTORIES])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Executor]:
    ex = EXECUTOR_FACTORIES[request.param](tmp_path)
    yield ex
    ex.close()


@pytest.fixture
def node_dir(executor: Executor) -> Iterator[str]:
    """A scratch directory on the node, removed afterwards."""
    made = executor.run(["mktemp", "-d"], timeout=30)
    assert made.returncode == 0, made.stderr
    path = made.stdout.strip()
    yield path
    executor.run(["rm", "-rf", path], timeout=30)


@pytest.fixture
def started(executor: Executor) -> Iterator[list[ProcessHandle]]:
    """Handles a test started: stopped at teardown whatever the test did."""
    handles: list[ProcessHandle] = []
    yield handles
    for handle in handles:
        executor.stop(handle, grace_s=1.0)
