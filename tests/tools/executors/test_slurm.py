"""SlurmExecutor against the single-node cluster of .ci/cluster_up.sh (8 fake GPUs)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.tools.executors.conftest import load_cluster_env, make_slurm
from tools.executors.slurm import SlurmError, SlurmExecutor, parse_scontrol, status_from_job

pytestmark = pytest.mark.cluster


def slurm(tmp_path: Path, **kw) -> SlurmExecutor:
    make_slurm(tmp_path)  # skips when the cluster is not up
    env = load_cluster_env()
    return SlurmExecutor(
        partition=env["CAMPAIGN_CLUSTER_SLURM_PARTITION"],
        slurm_conf=env["SLURM_CONF"],
        workdir=str(tmp_path / "node"),
        time_limit="00:10:00",
        **kw,
    )


def squeue(*args: str) -> str:
    env = {**os.environ, "SLURM_CONF": load_cluster_env()["SLURM_CONF"]}
    return subprocess.run(["squeue", "-h", *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


def wait_for(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.1)
    return value


def test_job_lifecycle_and_scancel_leaves_no_job(tmp_path: Path) -> None:
    ex = slurm(tmp_path, gres="gpu:1", exclusive=False)
    handle = ex.start(["sleep", "300"], log_path="life.log")
    assert handle.job_id and handle.host == "127.0.0.1" and handle.pgid == handle.pid
    assert squeue("-j", handle.job_id, "-o", "%T|%j") == "RUNNING|campaign-life"
    assert ex.poll(handle) is None
    assert 0 <= ex.queue_wait_s(handle) < 10
    assert ex.stop(handle, grace_s=2) == -15
    assert squeue("-j", handle.job_id) == ""
    assert subprocess.run(["ps", "-p", str(handle.pid)], capture_output=True).returncode == 1
    assert ex.stop(handle, grace_s=1) == -15  # idempotent


def test_finished_job_reports_its_status(tmp_path: Path) -> None:
    ex = slurm(tmp_path, gres=None, exclusive=False)
    handle = ex.start(["sh", "-c", "echo done; exit 5"], log_path="done.log")
    assert wait_for(lambda: ex.poll(handle) is not None) and ex.poll(handle) == 5
    wait_for(lambda: squeue("-j", handle.job_id) == "")
    assert ex.tail(handle, 1) == ["done"]


@pytest.mark.parametrize(("exclusive", "visible"), [(False, "0,1,2"), (True, "0,1,2,3,4,5,6,7")])
def test_gres_gpus_are_visible_in_the_job(tmp_path: Path, exclusive: bool, visible: str) -> None:
    """gpu:3 gives three devices; --exclusive gives the job the whole node, all eight."""
    ex = slurm(tmp_path, gres="gpu:3", exclusive=exclusive)
    # which devices the job gets depends on none being held: the cluster tests run one at a
    # time, but a job the previous test cancelled may still be completing (it keeps its GPU)
    try:
        wait_for(lambda: squeue("-o", "%i %T %j") == "", timeout=30)
    except AssertionError:
        raise AssertionError(f"another job holds the node: {squeue('-o', '%i %T %j')}") from None
    handle = ex.start(["sh", "-c", 'echo "CVD=$CUDA_VISIBLE_DEVICES"; sleep 300'], log_path="gres.log")
    try:
        line = wait_for(lambda: next((ln for ln in ex.tail(handle, 5) if ln.startswith("CVD=")), None))
        assert line == f"CVD={visible}"
        assert "gres:gpu:3" in ex.job_info(handle.job_id)["TresPerNode"]
    finally:
        ex.stop(handle, grace_s=1)


def test_queue_wait_is_measured_while_gpus_are_busy(tmp_path: Path) -> None:
    blocker_ex = slurm(tmp_path / "a", gres="gpu:8", exclusive=True)
    waiter_ex = slurm(tmp_path / "b", gres="gpu:1", exclusive=False)
    blocker = blocker_ex.start(["sleep", "300"], log_path="block.log")
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(h=waiter_ex.start(["sleep", "300"], log_path="wait.log")))
    try:
        thread.start()
        wait_for(lambda: squeue("-n", "campaign-wait", "-o", "%T") == "PENDING")
        time.sleep(1.5)
        blocker_ex.stop(blocker, grace_s=1)
        thread.join(60)
        waited = waiter_ex.queue_wait_s(result["h"])
        assert 1.5 <= waited < 30
        assert 1 <= SlurmExecutor(slurm_conf=load_cluster_env()["SLURM_CONF"]).queue_wait_s(result["h"]) <= waited + 1
    finally:
        blocker_ex.stop(blocker, grace_s=1)
        thread.join(60)
        if "h" in result:
            waiter_ex.stop(result["h"], grace_s=1)


def test_queue_timeout_cancels_the_job(tmp_path: Path) -> None:
    blocker_ex = slurm(tmp_path / "a", gres="gpu:8", exclusive=True)
    blocker = blocker_ex.start(["sleep", "300"], log_path="block.log")
    try:
        ex = slurm(tmp_path / "b", gres="gpu:1", queue_timeout_s=1.0)
        token = "hf_" + os.urandom(12).hex()
        with pytest.raises(SlurmError, match="still queued"):
            ex.start(["sleep", "300"], log_path="late.log", env={"HF_TOKEN": token})
        wait_for(lambda: squeue("-n", "campaign-late") == "")
        # the job never ran, so its watcher never read the env file: start deleted it
        left = [p for p in (tmp_path / "b").rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
        assert left == [] and list((tmp_path / "b" / "node" / ".campaign-env").iterdir()) == []
    finally:
        blocker_ex.stop(blocker, grace_s=1)


def test_scontrol_parsing_and_status_rules() -> None:
    fields = parse_scontrol("JobId=7 JobName=x JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 BatchHost=n1")
    assert fields["JobState"] == "FAILED" and fields["BatchHost"] == "n1"
    assert status_from_job(fields) == 3
    assert status_from_job({"JobState": "FAILED", "ExitCode": "0:9"}) == -9
    assert status_from_job({"JobState": "CANCELLED", "ExitCode": "0:0"}) == -15
    assert status_from_job({"JobState": "COMPLETED", "ExitCode": "0:0"}) == 0


def test_the_stop_step_runs_without_the_controllers_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`srun --overlap kill` inherits its caller's environment: the `kill` it runs (a
    wrapper first on PATH that records its environment) sees no controller secret."""
    seen = tmp_path / "kill-env"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kill").write_text(f'#!/bin/sh\nenv > {seen}\nexec /bin/kill "$@"\n')
    (bin_dir / "kill").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-controller-" + "k" * 20)
    monkeypatch.setenv("WANDB_API_KEY", "wandb-controller-secret")
    ex = slurm(tmp_path, gres="gpu:1", exclusive=False)
    handle = ex.start(["sleep", "300"], log_path="stop-env.log")
    assert ex.stop(handle, grace_s=2) == -15
    recorded = seen.read_text()
    assert f"PATH={bin_dir}:" in recorded, recorded  # the wrapper really ran as the stop step
    assert "sk-controller-" not in recorded and "wandb-controller-secret" not in recorded
