"""Node sections for the CI cluster (.ci/cluster_up.sh): the simulated node run on the
loopback sshd (as the unprivileged `campaign` user) and as a Slurm job.

The node needs a Python with the project's dependencies that its user can execute.
The controller's own interpreter is used when the node user can run it; otherwise
(an interpreter under a private home, e.g. pyenv in /root) a venv is made in the
cluster's shared dir from a system interpreter of the same minor version, with a
`.pth` file that adds the controller's site-packages: same ABI, same packages.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.needs import missing
from tests.tools.executors.conftest import load_cluster_env

PROBE = "import pydantic, aiohttp, yaml, httpx"


def ssh_argv(env: dict[str, str]) -> list[str]:
    return [
        "ssh",
        "-p",
        env["CAMPAIGN_CLUSTER_SSH_PORT"],
        "-i",
        env["CAMPAIGN_CLUSTER_SSH_KEY"],
        "-o",
        f"UserKnownHostsFile={env['CAMPAIGN_CLUSTER_SSH_KNOWN_HOSTS']}",
        "-o",
        "BatchMode=yes",
        f"{env['CAMPAIGN_CLUSTER_SSH_USER']}@{env['CAMPAIGN_CLUSTER_SSH_HOST']}",
    ]


def _node_can_run(env: dict[str, str], python: str) -> bool:
    cmd = f"{shlex.quote(python)} -c {shlex.quote(PROBE)}"
    return subprocess.run(ssh_argv(env) + [cmd], capture_output=True, timeout=60).returncode == 0


def node_python(env: dict[str, str]) -> str:
    """An interpreter the node user can run, with the controller's packages."""
    if _node_can_run(env, sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    tag = hashlib.sha256(("|".join(sorted(paths)) + sys.version).encode()).hexdigest()[:10]
    venv = Path(env["CAMPAIGN_CLUSTER_SHARED_DIR"]) / f"node-venv-{tag}"
    python = venv / "bin" / "python"
    if not python.exists():
        base = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
        if base is None:
            missing(
                f"the node user cannot run {sys.executable} and there is no system {version}"
                " (fix: a venv the node user can read, as `bash .ci/run` makes in /opt/campaign-ci/venv)"
            )
        subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        site = venv / "lib" / version / "site-packages"
        (site / "controller.pth").write_text("\n".join(sorted(paths)) + "\n")
        subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
    if not _node_can_run(env, str(python)):
        missing(
            f"the node user can read neither {sys.executable} nor its site-packages {sorted(paths)}"
            " (fix: a venv the node user can read, as `bash .ci/run` makes in /opt/campaign-ci/venv)"
        )
    return str(python)


def ssh_node(env: dict[str, str], name: str, workdir: str, sim: dict, python: str) -> dict:
    return {
        "kind": "ssh",
        "name": name,
        "host": env["CAMPAIGN_CLUSTER_SSH_HOST"],
        "user": env["CAMPAIGN_CLUSTER_SSH_USER"],
        "port": int(env["CAMPAIGN_CLUSTER_SSH_PORT"]),
        "identity_file": env["CAMPAIGN_CLUSTER_SSH_KEY"],
        "ssh_options": [
            "-o",
            f"UserKnownHostsFile={env['CAMPAIGN_CLUSTER_SSH_KNOWN_HOSTS']}",
            "-o",
            "StrictHostKeyChecking=yes",
        ],
        "workdir": workdir,
        "python": python,
        "simulated": {**sim, "name": name},
    }


def slurm_node(env: dict[str, str], workdir: str, sim: dict) -> dict:
    return {
        "kind": "slurm",
        "name": "slurm-node",
        "partition": env["CAMPAIGN_CLUSTER_SLURM_PARTITION"],
        "gres": "gpu:8",
        "exclusive": False,  # tp 8: the simulated node checks CUDA_VISIBLE_DEVICES
        "time_limit": "00:20:00",
        "workdir": workdir,
        "python": sys.executable,
        "simulated": {**sim, "name": "slurm-node"},
    }


def cluster_env() -> dict[str, str]:
    """The cluster's env (skips when it is not up); SLURM_CONF exported for the executors."""
    env = load_cluster_env()
    os.environ.setdefault("SLURM_CONF", env["SLURM_CONF"])
    return env


def campaign_processes(env: dict[str, str], marker: str) -> list[str]:
    """simnode processes of the node user whose command line names `marker`."""
    out = subprocess.run(
        ["ps", "-ww", "-u", env["CAMPAIGN_CLUSTER_SSH_USER"], "-o", "pid=,args="], capture_output=True, text=True
    ).stdout
    return [ln for ln in out.splitlines() if "tools.simnode" in ln and marker in ln]


def squeue_jobs(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %j"],
        env={**os.environ, "SLURM_CONF": env["SLURM_CONF"]},
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def remote_playbook(
    tmp_path: Path, hypotheses: list[dict], *, node: dict | None = None, nodes: list[dict] | None = None, **over
) -> Path:
    """`sim_playbook` with a remote node section (it merges `node` into a simulated one)."""
    import yaml

    from tests.campaign.sim_playbook import sim_playbook

    path = sim_playbook(tmp_path, hypotheses, **over)
    data = yaml.safe_load(path.read_text())
    if node is not None:
        data["node"] = node
    if nodes is not None:
        data["nodes"] = nodes
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def node_section(kind: str, sim: dict, local_dir: Path, label: str) -> tuple[dict, str | None]:
    """A playbook's `node:` for `kind` (local: the simulated node on this machine; ssh,
    slurm: the cluster's) and its workdir: on ssh a fresh one in the shared dir the node
    user can write (tmp_path's name repeats across sessions, the shared dir is not reset),
    on Slurm one under `local_dir` (the submit host is this machine), None for local."""
    import uuid

    if kind == "local":
        return {"kind": "simulated", **sim}, None
    cluster = cluster_env()
    if kind == "ssh":
        workdir = f"{cluster['CAMPAIGN_CLUSTER_SHARED_DIR']}/{label}-{uuid.uuid4().hex[:12]}"
        return ssh_node(cluster, "ssh-node", workdir, sim, node_python(cluster)), workdir
    workdir = str(local_dir / "slurm-node")
    return slurm_node(cluster, workdir, sim), workdir


def on_node(kind: str, script: str, stdin: bytes | None = None) -> str:
    """Run a shell script as the node's user: over the cluster's ssh, else here."""
    argv = ssh_argv(cluster_env()) + [script] if kind == "ssh" else ["sh", "-c", script]
    r = subprocess.run(argv, input=stdin, capture_output=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()
