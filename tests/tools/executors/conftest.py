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

from campaign.domain.models import ProcessHandle
from tests.needs import missing
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor


def make_local(tmp_path: Path) -> Executor:
    return LocalExecutor()


EXECUTOR_FACTORIES: dict[str, Callable[[Path], Executor]] = {"local": make_local}
EXECUTOR_MARKS: dict[str, list[pytest.MarkDecorator]] = {"local": []}


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


# ---------------------------------------------------------------------------------
# Remote executors: ssh (loopback sshd) and slurm (local cluster) from .ci/cluster_up.sh.
# The cluster is found through its env file (CAMPAIGN_CLUSTER_ENV, default
# /tmp/campaign-cluster/env).  Where it is not up but this machine can start it (root,
# its daemons installed), the first `cluster` test starts it and the session stops it at
# exit; elsewhere they skip with the reason.
import atexit as _atexit  # noqa: E402
import os as _os  # noqa: E402
import shutil as _shutil  # noqa: E402
import subprocess as _subprocess  # noqa: E402

from tools.executors.slurm import SlurmExecutor  # noqa: E402
from tools.executors.ssh import SshExecutor  # noqa: E402

CLUSTER_ENV_FILE = _os.environ.get("CAMPAIGN_CLUSTER_ENV", "/tmp/campaign-cluster/env")
_CLUSTER_HINT = "start it with `sudo bash .ci/cluster_up.sh`"
_CLUSTER_UP = Path(__file__).resolve().parents[3] / ".ci" / "cluster_up.sh"
_DAEMONS = ("sshd", "slurmctld", "slurmd", "munged", "sbatch", "ssh", "scp", "rsync")
_started: dict[str, str | None] = {}  # "why": None once started, else why it could not be


def start_cluster() -> str | None:
    """Start (or restart the dead daemons of) the cluster once per test session with
    .ci/cluster_up.sh, where this machine can without installing anything: root, every
    daemon installed, the default env file.  None when it is up, else why not."""
    if "why" not in _started:
        path = "/usr/sbin:/usr/bin:/sbin:/bin:" + _os.environ.get("PATH", "")
        absent = [d for d in _DAEMONS if _shutil.which(d, path=path) is None]
        if _os.geteuid() != 0:
            why: str | None = "not root"
        elif absent:
            why = f"not installed here: {', '.join(absent)}"
        elif "CAMPAIGN_CLUSTER_ENV" in _os.environ:
            why = f"CAMPAIGN_CLUSTER_ENV names {CLUSTER_ENV_FILE}, a cluster this session does not manage"
        else:
            was_down = not _os.path.exists(CLUSTER_ENV_FILE)
            done = _subprocess.run(["bash", str(_CLUSTER_UP)], capture_output=True, text=True, timeout=300)
            why = None if done.returncode == 0 else f"{_CLUSTER_UP.name} failed: {done.stderr.strip()[-300:]}"
            if why is None and was_down:  # what this session started, it stops
                _atexit.register(
                    _subprocess.run,
                    ["bash", str(_CLUSTER_UP.with_name("cluster_down.sh"))],
                    capture_output=True,
                    timeout=120,
                )
        _started["why"] = why
    return _started["why"]


def load_cluster_env() -> dict[str, str]:
    """KEY=VALUE lines of the env file written by .ci/cluster_up.sh (started here if this
    machine can, `start_cluster`); skips the test with the reason where it cannot."""
    if not _os.path.exists(CLUSTER_ENV_FILE):
        why = start_cluster()
        if not _os.path.exists(CLUSTER_ENV_FILE):
            missing(
                f"cluster not up: no {CLUSTER_ENV_FILE}, and this session cannot start it "
                f"({why or 'no env file written'}; {_CLUSTER_HINT})"
            )
    with open(CLUSTER_ENV_FILE) as f:
        pairs = (ln.strip().split("=", 1) for ln in f if "=" in ln and not ln.lstrip().startswith("#"))
        return {k: v for k, v in pairs}


def make_ssh(tmp_path: Path) -> SshExecutor:
    env = load_cluster_env()
    ex = SshExecutor(
        env["CAMPAIGN_CLUSTER_SSH_HOST"],
        user=env["CAMPAIGN_CLUSTER_SSH_USER"],
        port=int(env["CAMPAIGN_CLUSTER_SSH_PORT"]),
        identity_file=env["CAMPAIGN_CLUSTER_SSH_KEY"],
        ssh_options=[
            "-o",
            f"UserKnownHostsFile={env['CAMPAIGN_CLUSTER_SSH_KNOWN_HOSTS']}",
            "-o",
            "StrictHostKeyChecking=yes",
        ],
        workdir=f"{env['CAMPAIGN_CLUSTER_SHARED_DIR']}/ssh-node-{tmp_path.name}-{_os.getpid()}",
    )
    try:
        ex.connect()
    except Exception as exc:  # the env file is stale: the daemons are gone
        ex.close()
        if start_cluster() is not None:
            missing(f"cluster env file present but sshd does not answer ({exc}); {_CLUSTER_HINT}")
        ex.connect()  # restarted: a failure now is the test's
    return ex


def make_slurm(tmp_path: Path) -> SlurmExecutor:
    env = load_cluster_env()
    conf = env["SLURM_CONF"]
    probe = _subprocess.run(
        ["sinfo", "-h", "-o", "%T"], env={**_os.environ, "SLURM_CONF": conf}, capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0 and start_cluster() is not None:
        missing(f"cluster env file present but slurmctld does not answer; {_CLUSTER_HINT}")
    return SlurmExecutor(
        partition=env["CAMPAIGN_CLUSTER_SLURM_PARTITION"],
        gres="gpu:1",
        slurm_conf=conf,
        time_limit="00:10:00",
        exclusive=False,
        workdir=str(tmp_path / "slurm-node"),
    )


EXECUTOR_FACTORIES.update({"ssh": make_ssh, "slurm": make_slurm})
EXECUTOR_MARKS.update({"ssh": [pytest.mark.cluster], "slurm": [pytest.mark.cluster]})


# One contract suite over every executor kind in the registry (local, ssh, slurm).
@pytest.fixture(params=[pytest.param(name, marks=EXECUTOR_MARKS.get(name, []), id=name) for name in EXECUTOR_FACTORIES])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Executor]:
    ex = EXECUTOR_FACTORIES[request.param](tmp_path)
    yield ex
    ex.close()
