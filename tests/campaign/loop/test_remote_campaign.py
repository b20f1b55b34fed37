"""End-to-end campaigns on the simulated node run remotely: through the ssh executor
(loopback sshd, unprivileged user), through the Slurm executor (local cluster), and on
two ssh nodes in parallel; a controller killed with SIGKILL mid-run leaves nothing
behind once `campaign resume` has reaped its ledger.  Needs `.ci/cluster_up.sh`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.remote_node import (
    campaign_processes,
    cluster_env,
    node_python,
    remote_playbook,
    slurm_node,
    squeue_jobs,
    ssh_node,
)
from tests.campaign.sim_playbook import FAST_NODE

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]

HYPS = [
    {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
    {"name": "no-cuda-graph", "flags": {"disable-cuda-graph": True}},
]
SINGLE = {
    "single_stream": {
        "concurrency": [1],
        "prompts": "fixed",
        "output_tokens": 64,
        "requests_per_level": 2,
        "warmup_requests": 0,
    }
}


def _env(cluster: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "SLURM_CONF": cluster["SLURM_CONF"]}


def _cli(tmp_path: Path, cluster: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=tmp_path,
        env=_env(cluster),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _show(tmp_path: Path, cluster: dict[str, str]) -> dict:
    status = json.loads(_cli(tmp_path, cluster, "status", "--db", "c.db", "--json").stdout)
    r = _cli(tmp_path, cluster, "show", status[0]["id"], "--db", "c.db", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _verdicts(data: dict) -> dict[str, dict]:
    return {e["hypothesis"]: e for e in data["experiments"] if e["hypothesis"] != "baseline" and e["verdict"]}


def _assert_seed_verdicts(v: dict[str, dict]) -> None:
    assert (v["flashinfer-allreduce-fusion"]["verdict"], v["flashinfer-allreduce-fusion"]["failure_class"]) == (
        "dead_end",
        "jit_error",
    )
    assert v["no-cuda-graph"]["verdict"] == "dead_end" and "slower" in v["no-cuda-graph"]["reason"]


def _kill_mid_run(tmp_path: Path, cluster: dict[str, str], running: callable, timeout: float = 240) -> None:
    """Start `campaign run`, SIGKILL it once `running()` says a candidate server is up."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli.main", "run", "playbook.yaml", "--db", "c.db"],
        cwd=tmp_path,
        env=_env(cluster),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while not running():
            assert proc.poll() is None, "the campaign ended before it could be killed"
            assert time.monotonic() < deadline, "no candidate server came up"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _candidate_launched(node_workdir: Path) -> bool:
    logs = node_workdir / "logs"
    return any("-candidate-" in p.name for p in logs.rglob("*.log")) if logs.exists() else False


def test_ssh_campaign_end_to_end(tmp_path):
    cluster = cluster_env()
    workdir = f"{cluster['CAMPAIGN_CLUSTER_SHARED_DIR']}/e2e-ssh-{tmp_path.name}-{os.getpid()}"
    node = ssh_node(cluster, "ssh-node", workdir, {**FAST_NODE, "seed": 7301}, node_python(cluster))
    remote_playbook(tmp_path, HYPS, node=node, workloads=SINGLE)
    t0 = time.monotonic()
    run = _cli(tmp_path, cluster, "run", "playbook.yaml", "--db", "c.db")
    assert run.returncode == 0, run.stdout + run.stderr
    data = _show(tmp_path, cluster)
    _assert_seed_verdicts(_verdicts(data))
    assert {e["node"] for e in data["experiments"]} == {"ssh-node"}
    # the node ran the shipped code as the node user, and the fingerprint came from there
    shipped = list(Path(workdir).glob("code-*/tools/simnode/__main__.py"))
    assert shipped and shipped[0].parent.parent.parent.owner() == cluster["CAMPAIGN_CLUSTER_SSH_USER"]
    from campaign.store import Store

    store = Store(tmp_path / "c.db")
    fp = store.latest_fingerprint(data["id"])
    assert fp is not None and fp.gpu and fp.cuda.startswith("12.8") and fp.gpu_count == 8
    assert campaign_processes(cluster, "--seed 7301") == []
    print(f"ssh campaign: {time.monotonic() - t0:.1f} s")


def test_slurm_campaign_killed_then_resumed_leaves_no_job(tmp_path):
    cluster = cluster_env()
    assert squeue_jobs(cluster) == [], "the Slurm queue is not empty before the test"
    node = slurm_node(cluster, str(tmp_path / "slurm-node"), {**FAST_NODE, "seed": 7302})
    remote_playbook(tmp_path, HYPS, node=node, workloads=SINGLE)
    _kill_mid_run(
        tmp_path, cluster, lambda: _candidate_launched(tmp_path / "slurm-node") and bool(squeue_jobs(cluster))
    )
    assert squeue_jobs(cluster), "the killed controller's job should still be queued before the resume"
    status = json.loads(_cli(tmp_path, cluster, "status", "--db", "c.db", "--json").stdout)
    cid = status[0]["id"]
    res = _cli(tmp_path, cluster, "resume", cid, "--db", "c.db")
    assert res.returncode == 0, res.stdout + res.stderr
    data = _show(tmp_path, cluster)
    _assert_seed_verdicts(_verdicts(data))
    assert {e["node"] for e in data["experiments"] if e["status"] != "stale"} == {"slurm-node"}
    assert squeue_jobs(cluster) == []


PARALLEL_HYPS = [
    {"name": "no-cuda-graph", "flags": {"disable-cuda-graph": True}},
    {"name": "chunked-prefill", "flags": {"chunked-prefill-size": 1024}},
    {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
]


def test_two_ssh_nodes_in_parallel_killed_then_resumed(tmp_path):
    cluster = cluster_env()
    python = node_python(cluster)
    shared = cluster["CAMPAIGN_CLUSTER_SHARED_DIR"]
    sim = {**FAST_NODE, "seed": 7303}
    nodes = [
        ssh_node(cluster, "ssh-a", f"{shared}/e2e-a-{tmp_path.name}", sim, python),
        ssh_node(cluster, "ssh-b", f"{shared}/e2e-b-{tmp_path.name}", sim, python),
    ]
    remote_playbook(tmp_path, PARALLEL_HYPS, nodes=nodes, workloads=SINGLE)
    # killed while both branches of the first batch run their servers on the two "hosts"
    _kill_mid_run(tmp_path, cluster, lambda: len(campaign_processes(cluster, "--seed 7303")) >= 2)
    assert len(campaign_processes(cluster, "--seed 7303")) >= 2, "the killed controller's servers should still run"
    status = json.loads(_cli(tmp_path, cluster, "status", "--db", "c.db", "--json").stdout)
    res = _cli(tmp_path, cluster, "resume", status[0]["id"], "--db", "c.db")
    assert res.returncode == 0, res.stdout + res.stderr
    data = _show(tmp_path, cluster)
    assert data["status"] == "finished"
    v = _verdicts(data)
    _assert_seed_verdicts(v)
    assert set(v) == {h["name"] for h in PARALLEL_HYPS}
    # the batch: one hypothesis per node; the last one alone on the first node
    assert [v[h["name"]]["node"] for h in PARALLEL_HYPS] == ["ssh-a", "ssh-b", "ssh-a"]
    assert campaign_processes(cluster, "--seed 7303") == []
    journal = (tmp_path / "journal" / "test.md").read_text()
    assert "node ssh-a" in journal and "node ssh-b" in journal
