"""Node directories that are ours: a workdir another user made, or one anybody may write
to, is refused with one line before anything is written there (another user could read
or replace a candidate's log); the default is the node user's own `~/.cache`, made 0700;
the watcher's pid/status files are created exclusively, so a link planted at
`<log>.pid.tmp` never truncates the file it points to."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from tests.tools.executors.conftest import load_cluster_env, make_slurm, make_ssh
from tools.executors.slurm import SlurmExecutor
from tools.executors.ssh import SshExecutor

pytestmark = pytest.mark.cluster
NOBODY = 65534


def _ssh(tmp_path: Path, workdir: str | None) -> SshExecutor:
    made = make_ssh(tmp_path)  # skips when the cluster is not up
    made.close()
    env = load_cluster_env()
    kw = {} if workdir is None else {"workdir": workdir}
    return SshExecutor(
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
        **kw,
    )


def _shared(tmp_path: Path, name: str) -> Path:
    return Path(load_cluster_env()["CAMPAIGN_CLUSTER_SHARED_DIR"]) / f"{name}-{tmp_path.name}-{os.getpid()}"


@pytest.mark.parametrize(
    ("owner", "mode", "says"),
    [
        ("other", 0o777, "belongs to another user"),
        ("node user", 0o777, "is writable by others (mode 777)"),
    ],
)
def test_ssh_refuses_a_workdir_that_is_not_its_own(tmp_path: Path, owner: str, mode: int, says: str) -> None:
    planted = _shared(tmp_path, "planted")
    planted.mkdir()
    (planted / "logs").mkdir()
    if owner == "node user":
        uid = int(
            subprocess.run(
                ["id", "-u", load_cluster_env()["CAMPAIGN_CLUSTER_SSH_USER"]],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        os.chown(planted, uid, -1)
    planted.chmod(mode)
    ex = _ssh(tmp_path, str(planted))
    try:
        with pytest.raises(UserError, match=re.escape(f"node workdir {planted} {says}")) as err:
            ex.start(["sleep", "5"], log_path="logs/cand.log")
        assert "(fix:" in str(err.value) and "\n" not in str(err.value)
        assert list((planted / "logs").iterdir()) == []  # nothing was written there
    finally:
        ex.close()
        subprocess.run(["rm", "-rf", str(planted)], check=False)


def test_ssh_default_workdir_is_the_node_users_own_and_private(tmp_path: Path) -> None:
    ex = _ssh(tmp_path, None)
    try:
        home = ex.run(["sh", "-c", 'printf %s "$HOME"']).stdout
        assert ex.workdir == f"{home}/.cache/campaign-node"
        res = ex.run(["stat", "-c", "%a %U", ex.workdir])
        assert res.stdout.split() == ["700", load_cluster_env()["CAMPAIGN_CLUSTER_SSH_USER"]], res
    finally:
        ex.close()


def test_slurm_refuses_a_shared_workdir_and_makes_its_own_private(tmp_path: Path) -> None:
    make_slurm(tmp_path)  # skips when the cluster is not up
    env = load_cluster_env()
    for owner, says in ((os.getuid(), "is writable by others"), (NOBODY, "belongs to another user (uid 65534)")):
        planted = tmp_path / f"planted-{owner}"
        planted.mkdir()
        os.chown(planted, owner, -1)
        planted.chmod(0o777)
        ex = SlurmExecutor(
            partition=env["CAMPAIGN_CLUSTER_SLURM_PARTITION"],
            slurm_conf=env["SLURM_CONF"],
            gres="gpu:1",
            exclusive=False,
            workdir=str(planted),
        )
        with pytest.raises(UserError, match=re.escape(f"slurm: node workdir {planted} {says}")):
            ex.start(["sleep", "5"], log_path="cand.log")
        assert list(planted.iterdir()) == []
    fresh = SlurmExecutor(
        partition=env["CAMPAIGN_CLUSTER_SLURM_PARTITION"],
        slurm_conf=env["SLURM_CONF"],
        gres="gpu:1",
        exclusive=False,
        workdir=str(tmp_path / "mine"),
    )
    assert stat.S_IMODE(os.stat(fresh.workdir).st_mode) == 0o700


def test_a_link_planted_at_the_pid_temp_file_is_not_followed(tmp_path: Path) -> None:
    ex = _ssh(tmp_path, str(_shared(tmp_path, "links")))
    victim = _shared(tmp_path, "victim.txt")
    try:
        assert ex.run(["sh", "-c", f"echo precious > {victim}"]).returncode == 0
        ex.run(["mkdir", "-p", f"{ex.workdir}/logs"])
        log = f"{ex.workdir}/logs/cand.log"
        ex.run(["ln", "-s", str(victim), f"{log}.pid.tmp"])
        handle = ex.start(["sleep", "0.2"], log_path=log)
        deadline = time.monotonic() + 30
        while ex.poll(handle) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert handle.pid and ex.poll(handle) == 0
        assert ex.run(["cat", str(victim)]).stdout == "precious\n"
    finally:
        ex.run(["rm", "-rf", ex.workdir, str(victim)])
        ex.close()
