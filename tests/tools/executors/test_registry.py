"""build_executor maps each playbook node kind to its executor; bad specs are UserErrors."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.playbook.nodes import SimulatedNodeSpec
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor, LocalNodeSpec
from tools.executors.registry import build_executor
from tools.executors.slurm import SlurmExecutor, SlurmNodeSpec
from tools.executors.ssh import SshExecutor, SshNodeSpec


def test_each_kind_gets_its_executor(tmp_path: Path) -> None:
    key = tmp_path / "id_test"
    key.write_text("not a real key")
    assert isinstance(build_executor(SimulatedNodeSpec()), LocalExecutor)
    assert isinstance(build_executor(LocalNodeSpec(kind="local")), LocalExecutor)
    ssh = build_executor(
        SshNodeSpec(
            kind="ssh",
            host="gpu-7",
            user="me",
            port=2200,
            identity_file=str(key),
            ssh_options=["-J", "bastion"],
            workdir="/scratch/c",
            python="python3.11",
        )
    )
    assert isinstance(ssh, SshExecutor) and isinstance(ssh, Executor)
    assert (ssh.target, ssh.user, ssh.port, ssh.identity_file, ssh.workdir_setting, ssh.python) == (
        "gpu-7",
        "me",
        2200,
        str(key),
        "/scratch/c",
        "python3.11",
    )
    assert ssh.ssh_argv()[-1] == "gpu-7" and "-J" in ssh.ssh_argv()
    slurm = build_executor(
        SlurmNodeSpec(kind="slurm", partition="h100", gres="gpu:4", time_limit="02:00:00", exclusive=False)
    )
    assert isinstance(slurm, SlurmExecutor)
    assert slurm.submit_argv("job.sh", log_path="/l", job_name="campaign-x", cwd="/w") == [
        "sbatch",
        "--parsable",
        "--job-name=campaign-x",
        "--output=/l",
        "--open-mode=append",
        "--chdir=/w",
        "--time=02:00:00",
        "--partition=h100",
        "--gres=gpu:4",
        "job.sh",
    ]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (SshNodeSpec(kind="ssh", host="h", identity_file="/no/such/key"), "node.identity_file"),
        (SshNodeSpec(kind="ssh", host="h", port=70000), "node.port"),
        (SlurmNodeSpec(kind="slurm", gpus=0), "node.gpus"),
    ],
)
def test_bad_specs_name_the_field(spec, field: str) -> None:
    with pytest.raises(UserError, match=field):
        build_executor(spec)
