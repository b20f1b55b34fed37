"""SshExecutor against the loopback sshd of .ci/cluster_up.sh (the contract suite
covers the Protocol; these cover what is ssh-specific)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from campaign.domain.models import ProcessHandle
from tests.tools.executors.conftest import load_cluster_env, make_ssh
from tools.executors.remote_shell import decode_complete
from tools.executors.ssh import SshError, SshExecutor

pytestmark = pytest.mark.cluster


@pytest.fixture
def ssh(tmp_path: Path):
    ex = make_ssh(tmp_path)
    yield ex
    ex.close()


def master_pid(ex: SshExecutor) -> int:
    out = subprocess.run(["ssh", *ex._common(), "-O", "check", ex.target], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(re.search(r"pid=(\d+)", out.stderr).group(1))


def group_members(ex: SshExecutor, pgid: int) -> list[str]:
    ps = ex.run(["ps", "-e", "-o", "pgid=,stat=,args="]).stdout.splitlines()
    return [ln for ln in ps if ln.split()[0] == str(pgid) and not ln.split()[1].startswith("Z")]


def test_control_master_is_reused_and_closed(ssh: SshExecutor) -> None:
    assert ssh.run(["true"]).returncode == 0
    pid = master_pid(ssh)
    assert len(ssh.control_path) < 60  # sun_path limit is ~100 bytes
    t0 = time.monotonic()
    for _ in range(5):
        assert ssh.run(["echo", "x"]).stdout == "x\n"
    assert (time.monotonic() - t0) / 5 < 1.0
    assert master_pid(ssh) == pid  # same master: no new connection per call
    ssh.close()
    assert not ssh.master_alive()
    assert not Path(ssh.control_path).exists()
    assert ssh.run(["echo", "again"]).stdout == "again\n"  # reconnects after close


def test_group_stop_leaves_no_process_on_node(ssh: SshExecutor, tmp_path: Path) -> None:
    handle = ssh.start(["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & wait"], log_path="grp.log")
    assert handle.pgid == handle.pid and handle.host == "127.0.0.1"
    assert len(group_members(ssh, handle.pgid)) >= 3
    t0 = time.monotonic()
    status = ssh.stop(handle, grace_s=0.5)
    assert time.monotonic() - t0 < 10
    assert status == -9  # TERM ignored: KILLed after the grace period
    assert group_members(ssh, handle.pgid) == []


def test_handle_of_a_killed_controller_is_stopped_by_a_fresh_executor(tmp_path: Path) -> None:
    env = load_cluster_env()
    controller = f"""
import json, os, sys
sys.path.insert(0, {str(Path.cwd())!r})
from tests.tools.executors.conftest import make_ssh
from pathlib import Path
ex = make_ssh(Path({str(tmp_path)!r}))
h = ex.start(["sleep", "300"], log_path="orphan.log")
print(json.dumps({{"handle": h.model_dump(), "control": ex.control_path}}), flush=True)
os.kill(os.getpid(), 9)
"""
    proc = subprocess.run(
        [sys.executable, "-c", controller],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "CAMPAIGN_CLUSTER_ENV": str(Path(env["CAMPAIGN_CLUSTER_SSH_KEY"]).parents[1] / "env"),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert proc.returncode == -9, proc.stderr
    record = json.loads(proc.stdout.splitlines()[-1])
    handle = ProcessHandle.model_validate(record["handle"])
    fresh = make_ssh(tmp_path)
    try:
        assert fresh.poll(handle) is None
        assert fresh.stop(handle, grace_s=2) == -15
        assert group_members(fresh, handle.pgid) == []
        assert fresh.poll(handle) == -15
    finally:
        fresh.close()
        subprocess.run(["ssh", "-o", f"ControlPath={record['control']}", "-O", "exit", "x"], capture_output=True)
        shutil.rmtree(Path(record["control"]).parent, ignore_errors=True)


def test_tunnel_reaches_a_server_on_the_node(ssh: SshExecutor) -> None:
    port = ssh.free_port()
    server = ssh.start(["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"], log_path="http.log")
    try:
        local = ssh.tunnel(port)
        assert ssh.tunnel(port) == local
        deadline = time.monotonic() + 20
        while True:
            try:
                resp = httpx.get(f"http://127.0.0.1:{local}/", timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert resp.status_code == 200 and "Directory listing" in resp.text
    finally:
        ssh.stop(server, grace_s=2)


def test_run_returns_large_output_whole(ssh: SshExecutor) -> None:
    res = ssh.run(["python3", "-c", "import sys; sys.stdout.write('y' * 6_000_000)"])
    assert res.returncode == 0 and len(res.stdout) == 6_000_000


def test_read_log_never_splits_a_character(ssh: SshExecutor) -> None:
    handle = ssh.start(["sh", "-c", "printf 'aé'"], log_path="utf.log")
    while ssh.poll(handle) is None:
        time.sleep(0.05)
    assert ssh.read_log(handle, 0) == ("aé", 3)
    assert ssh.read_log(handle, 1) == ("é", 3)
    assert ssh.read_log(handle, 3) == ("", 3)


def test_decode_complete_keeps_a_cut_character_for_the_next_read() -> None:
    assert decode_complete("aé".encode()[:2]) == ("a", 1)
    assert decode_complete("a€".encode()[:3]) == ("a", 1)
    assert decode_complete("a€".encode()) == ("a€", 4)
    assert decode_complete(b"") == ("", 0)


def test_directory_round_trip(ssh: SshExecutor, tmp_path: Path) -> None:
    (tmp_path / "src" / "d").mkdir(parents=True)
    (tmp_path / "src" / "d" / "f.txt").write_text("deep")
    ssh.put(str(tmp_path / "src"), "copied")
    ssh.get("copied", str(tmp_path / "back"))
    assert (tmp_path / "back" / "d" / "f.txt").read_text() == "deep"
    with pytest.raises(FileNotFoundError):
        ssh.get("no/such/path", str(tmp_path / "x"))


def test_ssh_config_alias_is_honoured(tmp_path: Path) -> None:
    env = load_cluster_env()
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host ci-node\n  HostName 127.0.0.1\n  Port {env['CAMPAIGN_CLUSTER_SSH_PORT']}\n"
        f"  User {env['CAMPAIGN_CLUSTER_SSH_USER']}\n  IdentityFile {env['CAMPAIGN_CLUSTER_SSH_KEY']}\n"
        f"  UserKnownHostsFile {env['CAMPAIGN_CLUSTER_SSH_KNOWN_HOSTS']}\n"
    )
    workdir = f"{env['CAMPAIGN_CLUSTER_SHARED_DIR']}/alias-{tmp_path.name}-{os.getpid()}"
    with SshExecutor("ci-node", ssh_options=["-F", str(config)], workdir=workdir) as ex:
        assert ex.host == "127.0.0.1"
        assert ex.run(["whoami"]).stdout.strip() == env["CAMPAIGN_CLUSTER_SSH_USER"]


def test_unreachable_node_raises_ssh_error_quickly(tmp_path: Path) -> None:
    env = load_cluster_env()
    ex = SshExecutor("127.0.0.1", port=1, identity_file=env["CAMPAIGN_CLUSTER_SSH_KEY"], connect_timeout_s=5)
    t0 = time.monotonic()
    with pytest.raises(SshError, match="cannot connect"):
        ex.run(["true"])
    assert time.monotonic() - t0 < 10
    ex.close()
