"""A server known only by its launch intent is found by the token in its environment,
on every executor kind (local /proc scan, the scan over ssh, `squeue --name` plus the
token in the batch script on Slurm), and the handle found stops it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools.executors.conftest import EXECUTOR_FACTORIES, EXECUTOR_MARKS
from tools.executors.base import LAUNCH_TOKEN_ENV, Executor


@pytest.fixture(params=[pytest.param(name, marks=EXECUTOR_MARKS.get(name, []), id=name) for name in EXECUTOR_FACTORIES])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Executor]:
    ex = EXECUTOR_FACTORIES[request.param](tmp_path)
    yield ex
    ex.close()


def test_found_by_token_and_stopped(executor: Executor, tmp_path: Path) -> None:
    made = executor.run(["mktemp", "-d"], timeout=30)
    workdir = made.stdout.strip() if executor.kind == "ssh" else str(tmp_path)
    log = f"{workdir}/orphan-{uuid.uuid4().hex[:6]}.log"
    token = uuid.uuid4().hex
    handle = executor.start(["sleep", "300"], log_path=log, env={LAUNCH_TOKEN_ENV: token})
    try:
        assert executor.find_by_token(uuid.uuid4().hex, log_path=handle.log_path, host=handle.host) == []
        found = executor.find_by_token(token, log_path=handle.log_path, host=handle.host)
        assert len(found) == 1
        assert (found[0].job_id, found[0].pgid) == (handle.job_id, handle.pgid)
        executor.stop(found[0], grace_s=1.0)
        deadline = time.monotonic() + 20
        while executor.poll(handle) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert executor.poll(handle) is not None
        assert executor.find_by_token(token, log_path=handle.log_path, host=handle.host) == []
    finally:
        executor.stop(handle, grace_s=1.0)
