"""The executor contract: every executor kind must pass these unchanged.

Written against the Protocol only: scripts reach the node with `put`, logs are read
with `read_log`/`tail`, and liveness is checked on the node with `executor.run(ps)`,
so the same cases hold for a local, an ssh and a Slurm node.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import pytest

from campaign.domain import server_env
from campaign.domain.models import ProcessHandle
from campaign.domain.redact import expand_env_refs
from campaign.domain.server_env import DEFAULT_BASE_ENV
from tools.executors.base import Executor
from tools.executors.local import TOKEN_ENV

TREE_SCRIPT = """
import os, signal, subprocess, sys, time
role = sys.argv[1]
if role == "leader":
    subprocess.Popen([sys.executable, __file__, "child"])
    print(f"LEADER {os.getpid()}", flush=True)
elif role == "child":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # must be killed, not asked
    subprocess.Popen([sys.executable, __file__, "grandchild"])
    print(f"CHILD {os.getpid()}", flush=True)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"GRANDCHILD {os.getpid()}", flush=True)
time.sleep(600)
"""

STREAM_SCRIPT = """
import os, sys, time
for i in range(1, 6):
    print(f"line {i} {os.environ.get('CONTRACT_VAR', 'unset')}", flush=True)
    time.sleep(0.2)
print("to stderr", file=sys.stderr, flush=True)
time.sleep(600)
"""

CRASH_SCRIPT = """
import sys, time
print("loading weights", flush=True)
time.sleep(0.3)
print("RuntimeError: boom", file=sys.stderr, flush=True)
sys.exit(3)
"""


def upload(executor: Executor, tmp_path: Path, node_dir: str, name: str, text: str) -> str:
    local = tmp_path / name
    local.write_text(text)
    remote = f"{node_dir}/{name}"
    executor.put(str(local), remote)
    return remote


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def log_text(executor: Executor, handle: ProcessHandle) -> str:
    return executor.read_log(handle, 0)[0]


def alive_on_node(executor: Executor, pid: int) -> bool:
    res = executor.run(["ps", "-o", "stat=", "-p", str(pid)], timeout=30)
    stat = res.stdout.strip()
    return res.returncode == 0 and bool(stat) and not stat.startswith("Z")


def start_tree(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> tuple[ProcessHandle, dict[str, int]]:
    script = upload(executor, tmp_path, node_dir, "tree.py", TREE_SCRIPT)
    handle = executor.start(["python3", script, "leader"], log_path=f"{node_dir}/tree.log")
    started.append(handle)
    text = wait_for(lambda: (t := log_text(executor, handle)).count("\n") >= 3 and t)
    pids = {line.split()[0]: int(line.split()[1]) for line in text.splitlines() if line.strip()}
    assert set(pids) == {"LEADER", "CHILD", "GRANDCHILD"}
    return handle, pids


# -- run ---------------------------------------------------------------------------
def test_run_returns_status_stdout_and_stderr(executor: Executor) -> None:
    res = executor.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (res.returncode, res.stdout, res.stderr) == (7, "out\n", "err\n")


def test_run_passes_env_and_cwd(executor: Executor, node_dir: str) -> None:
    res = executor.run(["sh", "-c", 'echo "$CONTRACT_VAR"; pwd'], env={"CONTRACT_VAR": "a b;c"}, cwd=node_dir)
    assert res.returncode == 0
    value, cwd = res.stdout.splitlines()
    assert value == "a b;c"
    assert Path(cwd).resolve() == Path(node_dir).resolve()


def test_run_timeout_returns_124_quickly(executor: Executor) -> None:
    t0 = time.monotonic()
    res = executor.run(["sh", "-c", "sleep 30 & sleep 30"], timeout=1.0)
    assert res.returncode == 124
    assert time.monotonic() - t0 < 10


def test_run_missing_program_is_127(executor: Executor) -> None:
    assert executor.run(["no-such-program-xyz"]).returncode == 127


# -- start, logs ---------------------------------------------------------------------
def test_start_streams_log_by_offset(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    script = upload(executor, tmp_path, node_dir, "stream.py", STREAM_SCRIPT)
    handle = executor.start(["python3", script], log_path=f"{node_dir}/stream.log", env={"CONTRACT_VAR": "v1"})
    started.append(handle)
    assert handle.pid is not None and handle.pgid == handle.pid
    assert executor.poll(handle) is None

    first, offset = wait_for(lambda: (r := executor.read_log(handle, 0))[0].startswith("line 1") and r)
    chunks = [first]
    wait_for(lambda: "to stderr" in log_text(executor, handle))
    while True:
        text, new_offset = executor.read_log(handle, offset)
        if not text:
            assert new_offset == offset
            break
        chunks.append(text)
        offset = new_offset
    whole = "".join(chunks)
    assert whole == log_text(executor, handle)
    assert [ln for ln in whole.splitlines()] == [f"line {i} v1" for i in range(1, 6)] + ["to stderr"]
    assert executor.tail(handle, 2) == ["line 5 v1", "to stderr"]


def test_log_is_appended_not_truncated(executor: Executor, node_dir: str, started: list[ProcessHandle]) -> None:
    log = f"{node_dir}/shared.log"
    for word in ("first", "second"):
        handle = executor.start(["sh", "-c", f"echo {word}"], log_path=log)
        started.append(handle)
        wait_for(lambda: executor.poll(handle) is not None)
    assert log_text(executor, handle).split() == ["first", "second"]


# -- exit and stop -------------------------------------------------------------------
def test_crash_exit_status_seen_by_poll(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    script = upload(executor, tmp_path, node_dir, "crash.py", CRASH_SCRIPT)
    handle = executor.start(["python3", script], log_path=f"{node_dir}/crash.log")
    started.append(handle)
    assert wait_for(lambda: executor.poll(handle) is not None) is True
    assert executor.poll(handle) == 3
    assert executor.tail(handle, 1) == ["RuntimeError: boom"]
    assert executor.stop(handle, grace_s=1.0) == 3  # stopping an ended process reports its status


def test_stop_kills_whole_group_including_term_ignoring_members(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    handle, pids = start_tree(executor, tmp_path, node_dir, started)
    assert all(alive_on_node(executor, pid) for pid in pids.values())
    t0 = time.monotonic()
    executor.stop(handle, grace_s=1.0)
    assert time.monotonic() - t0 < 15
    assert not any(alive_on_node(executor, pid) for pid in pids.values())
    assert executor.poll(handle) is not None
    executor.stop(handle, grace_s=1.0)  # idempotent


def test_kill9_of_leader_then_stop_leaves_no_member(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    handle, pids = start_tree(executor, tmp_path, node_dir, started)
    assert executor.run(["kill", "-9", str(pids["LEADER"])]).returncode == 0
    wait_for(lambda: executor.poll(handle) is not None)
    assert alive_on_node(executor, pids["CHILD"])  # orphans survive the leader...
    executor.stop(handle, grace_s=1.0)
    assert not alive_on_node(executor, pids["CHILD"])  # ...but not the stop
    assert not alive_on_node(executor, pids["GRANDCHILD"])


def test_missing_program_fails_through_the_log(executor: Executor, node_dir: str, started: list[ProcessHandle]) -> None:
    handle = executor.start(["no-such-program-xyz", "--flag"], log_path=f"{node_dir}/missing.log")
    started.append(handle)
    wait_for(lambda: executor.poll(handle) is not None)
    assert executor.poll(handle) == 127
    assert "not found" in log_text(executor, handle)


# -- files and ports -----------------------------------------------------------------
def test_copy_files_both_ways(executor: Executor, tmp_path: Path, node_dir: str) -> None:
    src = tmp_path / "up.txt"
    src.write_text("payload ünïcode\n")
    executor.put(str(src), f"{node_dir}/sub/up.txt")
    assert executor.run(["cat", f"{node_dir}/sub/up.txt"]).stdout == "payload ünïcode\n"

    assert executor.run(["sh", "-c", f"echo made-on-node > {node_dir}/down.txt"]).returncode == 0
    executor.get(f"{node_dir}/down.txt", str(tmp_path / "back" / "down.txt"))
    assert (tmp_path / "back" / "down.txt").read_text() == "made-on-node\n"


def test_copy_directory_to_node(executor: Executor, tmp_path: Path, node_dir: str) -> None:
    (tmp_path / "tree" / "inner").mkdir(parents=True)
    (tmp_path / "tree" / "inner" / "a.txt").write_text("A")
    executor.put(str(tmp_path / "tree"), f"{node_dir}/tree")
    assert executor.run(["cat", f"{node_dir}/tree/inner/a.txt"]).stdout == "A"


def test_free_port_is_bindable_on_node(executor: Executor) -> None:
    port = executor.free_port()
    assert 1024 <= port <= 65535
    probe = f"import socket; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); print('ok')"
    res = executor.run(["python3", "-c", probe])
    assert (res.returncode, res.stdout.strip()) == (0, "ok")


def test_kind_and_host(executor: Executor) -> None:
    assert isinstance(executor, Executor)
    assert executor.kind in {"local", "ssh", "slurm"}
    assert executor.host


@pytest.mark.parametrize("lines", [1, 3])
def test_tail_of_finished_process(executor: Executor, node_dir: str, started: list[ProcessHandle], lines: int) -> None:
    handle = executor.start(["sh", "-c", "for i in 1 2 3 4 5; do echo row$i; done"], log_path=f"{node_dir}/rows.log")
    started.append(handle)
    wait_for(lambda: executor.poll(handle) is not None)
    assert executor.tail(handle, lines) == [f"row{i}" for i in range(6 - lines, 6)]


# -- secrets -------------------------------------------------------------------------
#: a stand-in server: its pid, then a long sleep (exec'd: the same pid, no interpreter
#: wrapper such as a pyenv shim adding variables of its own to the environment).
SERVER = ["sh", "-c", 'echo "PID $$"; exec sleep 600']
#: variables a shell sets for itself, whatever it was given.
SHELL_OWN = {"PWD", "SHLVL", "_"}


@pytest.fixture
def controller_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Secrets in the controller's environment, set before the executor is made (the
    Slurm executor snapshots the environment it submits with)."""
    values = {
        "CONTRACT_HF_TOKEN": "hf_" + secrets.token_hex(16),
        "OPENAI_API_KEY": "sk-" + secrets.token_hex(16),
        "CONTRACT_UNLISTED": "controller-only-" + secrets.token_hex(8),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def _process_lists(executor: Executor) -> str:
    """Every command line on the node and here (the ssh client's argv is here)."""
    here = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True, timeout=30, check=True).stdout
    node = executor.run(["ps", "-eww", "-o", "args="], timeout=30)
    assert node.returncode == 0, node.stderr
    return here + node.stdout


def _node_environ(executor: Executor, pid: int) -> dict[str, str]:
    res = executor.run(["cat", f"/proc/{pid}/environ"], timeout=30)
    assert res.returncode == 0, res.stderr
    return dict(item.split("=", 1) for item in res.stdout.split("\0") if "=" in item)


def _files_holding(executor: Executor, node_dirs: list[str], tmp_path: Path, values: list[str]) -> list[str]:
    """Copy each node directory back and search every byte for the values."""
    found = []
    for i, node_path in enumerate(node_dirs):
        if executor.run(["test", "-d", node_path], timeout=30).returncode != 0:
            continue
        local = tmp_path / f"scan-{i}"
        executor.get(node_path, str(local))
        for path in (p for p in local.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{node_path}/{path.relative_to(local)}" for v in values if v.encode() in data]
    return found


def test_launch_env_reaches_only_the_server(
    controller_secrets: dict[str, str], executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    """A secret referenced as ${NAME} reaches the server's environment and nothing
    else (no command line while it runs, no file left on the node); a controller
    secret it does not reference, and any variable off the base list, never reach it."""
    secret, api_key = controller_secrets["CONTRACT_HF_TOKEN"], controller_secrets["OPENAI_API_KEY"]
    env = expand_env_refs({"HF_TOKEN": "${CONTRACT_HF_TOKEN}", "CONTRACT_VAR": "plain value"})
    handle = executor.start(SERVER, log_path=f"{node_dir}/server.log", env=env)
    started.append(handle)
    text = wait_for(lambda: "PID" in (t := log_text(executor, handle)) and t)
    pid = int(text.split("PID", 1)[1].split()[0])

    commands = _process_lists(executor)
    assert not any(v in commands for v in (secret, api_key)), "a secret is on a command line"
    environ = _node_environ(executor, pid)
    assert environ.get("HF_TOKEN") == secret and environ.get("CONTRACT_VAR") == "plain value", sorted(environ)
    assert "PATH" in environ and "HOME" in environ
    assert api_key not in "\0".join(environ.values()), "an unreferenced controller secret reached the server"
    unlisted = sorted(
        k
        for k in environ
        if k not in env and not server_env.matches(k, DEFAULT_BASE_ENV) and k not in {TOKEN_ENV, *SHELL_OWN}
    )
    assert not unlisted, f"variables off the base list reached the server: {unlisted}"

    executor.stop(handle, grace_s=1.0)
    node_dirs = [node_dir] + ([executor.workdir] if hasattr(executor, "workdir") else [])
    leaks = _files_holding(executor, node_dirs, tmp_path, [secret, api_key])
    assert not leaks, f"secrets left on the node: {leaks}"


def test_base_env_selects_what_the_server_inherits(
    executor: Executor, tmp_path: Path, node_dir: str, started: list[ProcessHandle]
) -> None:
    """`base_env` replaces the default list: here only PATH is inherited."""
    handle = executor.start(SERVER, log_path=f"{node_dir}/server.log", env={"ONLY": "1"}, base_env=["PATH"])
    started.append(handle)
    text = wait_for(lambda: "PID" in (t := log_text(executor, handle)) and t)
    environ = _node_environ(executor, int(text.split("PID", 1)[1].split()[0]))
    assert set(environ) - {TOKEN_ENV, *SHELL_OWN} == {"PATH", "ONLY"}
