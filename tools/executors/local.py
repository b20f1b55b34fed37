"""The local executor: the controller's own machine is the node.

Long-lived processes are started as leaders of a new session (pid == pgid) so a
stop reaches every descendant.  Handles survive the controller: a fresh executor
(after a crash and resume) can still stop a handle's group, but only after it has
proved the group is the one it started (a token in the environment of a member, or
the leader's start time), so a recycled pid is never killed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from campaign.domain import server_env
from campaign.domain.models import CommandResult, ProcessHandle
from campaign.domain.redact import redact_argv
from campaign.domain.server_env import DEFAULT_BASE_ENV
from campaign.playbook.nodes import NodeSpecBase
from tools.executors import procinfo
from tools.executors.base import LAUNCH_TOKEN_ENV

#: environment variable carrying the identity token of a started process group.
TOKEN_ENV = "CAMPAIGN_PROCESS_TOKEN"
#: exit status reported for a group this executor did not start (it cannot wait on it).
UNKNOWN_STATUS = -1
#: returncode of `run` when the command timed out (as coreutils `timeout`).
TIMEOUT_STATUS = 124
#: returncode of `run` when the command cannot be executed (as a shell).
NOT_FOUND_STATUS = 127


class LocalNodeSpec(NodeSpecBase):
    """This machine, running a real engine."""

    kind: Literal["local"] = Field(description="this machine", examples=["local"])
    name: str = Field(default="local", description="the node's name in the record and the journal")
    workdir: str = Field(default=".campaign/node", description="where server logs and the run ledger go")


def process_token(handle: ProcessHandle) -> str:
    """The identity token of a handle, derivable from the handle alone (no extra field)."""
    raw = f"{handle.log_path}|{handle.started_at!r}".encode()
    return hashlib.sha256(raw).hexdigest()[:24]


def _merged_env(env: dict[str, str] | None) -> dict[str, str]:
    """A short command's environment: the same base list as a server's, then `env`.
    Auxiliary steps (git, mkdir, the Slurm stop step, the load generator on the node)
    never see the controller's credentials either."""
    return launch_env(env, None)


def launch_env(env: Mapping[str, str] | None, base_env: Sequence[str] | None) -> dict[str, str]:
    """A long-lived process's whole environment: the base list's variables of this
    machine, then `env` (see campaign.domain.server_env)."""
    patterns = DEFAULT_BASE_ENV if base_env is None else base_env
    return {**server_env.select(os.environ, patterns), **dict(env or {})}


class LocalExecutor:
    """Runs everything on this machine with real subprocesses and process groups."""

    kind = "local"

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    @classmethod
    def from_spec(cls, spec: NodeSpecBase) -> LocalExecutor:
        """The registry's builder: a local or simulated node needs no settings."""
        return cls()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    # -- short commands -------------------------------------------------------------
    def run(
        self, argv: list[str], *, timeout: float = 60.0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        """Run to completion; a timeout kills the command's whole group and returns 124."""
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=_merged_env(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(returncode=NOT_FOUND_STATUS, stderr=f"{argv[0]}: {exc.strerror or exc}\n")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            note = f"\ntimed out after {timeout:g}s\n"
            return CommandResult(
                returncode=TIMEOUT_STATUS,
                stdout=out.decode(errors="replace"),
                stderr=err.decode(errors="replace") + note,
            )
        return CommandResult(
            returncode=proc.returncode, stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace")
        )

    # -- long-lived processes -------------------------------------------------------
    def start(
        self,
        argv: list[str],
        *,
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        base_env: Sequence[str] | None = None,
    ) -> ProcessHandle:
        """Start `argv` as a group leader.  It is exec'd through `sh` so a missing
        program shows up as a logged "not found" and exit 127, as over ssh."""
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handle = ProcessHandle(
            executor=self.kind,
            host=self.host,
            log_path=log_path,
            started_at=time.time(),
            command=redact_argv(argv, env),
        )
        full_env = launch_env(env, base_env)
        full_env[TOKEN_ENV] = process_token(handle)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", 'exec "$@"', "sh", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        self._children[proc.pid] = proc
        return handle.model_copy(update={"pid": proc.pid, "pgid": proc.pid})

    def poll(self, handle: ProcessHandle) -> int | None:
        proc = self._children.get(handle.pid or -1)
        if proc is not None:
            return proc.poll()
        if handle.pid is not None and procinfo.is_running(handle.pid) and self._owns_group(handle):
            return None
        return UNKNOWN_STATUS

    def read_log(self, handle: ProcessHandle, offset: int = 0) -> tuple[str, int]:
        try:
            with open(handle.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return "", offset
        complete = procinfo.complete_utf8_prefix(data)
        return data[:complete].decode("utf-8", errors="replace"), offset + complete

    def tail(self, handle: ProcessHandle, lines: int = 50) -> list[str]:
        return procinfo.tail_file(handle.log_path, lines)

    def stop(self, handle: ProcessHandle, *, grace_s: float = 10.0) -> int | None:
        """TERM the group, KILL what is left after `grace_s`, reap.  Idempotent.  A group
        this executor cannot prove is the handle's is left alone."""
        pgid = handle.pgid or handle.pid
        if pgid is None:
            return None
        if procinfo.live_members(pgid) and self._owns_group(handle):
            self._signal_group(pgid, signal.SIGTERM)
            if not self._wait_group_gone(handle, pgid, grace_s):
                self._signal_group(pgid, signal.SIGKILL)
                self._wait_group_gone(handle, pgid, 10.0)
        return self._reap(handle)

    # -- files and ports ------------------------------------------------------------
    def put(self, local_path: str, remote_path: str) -> None:
        _copy(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        _copy(remote_path, local_path)

    def free_port(self) -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def queue_wait_s(self, handle: ProcessHandle) -> float | None:
        return None  # a local process starts at once

    def find_by_token(self, token: str, *, log_path: str, host: str, command: str = "") -> list[ProcessHandle]:
        return [
            ProcessHandle(
                executor=self.kind,
                host=host,
                log_path=log_path,
                command=command,
                pid=g,
                pgid=g,
                started_at=procinfo.start_time(g) or 0.0,
            )
            for g in procinfo.groups_with_env(f"{LAUNCH_TOKEN_ENV}={token}")
        ]

    def close(self) -> None:
        """Nothing to release locally; reaps children that already ended."""
        for pid, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[pid]

    # -- internals ------------------------------------------------------------------
    def _owns_group(self, handle: ProcessHandle) -> bool:
        pgid = handle.pgid or handle.pid
        if pgid is None:
            return False
        if (handle.pid or -1) in self._children:
            return True
        token = f"{TOKEN_ENV}={process_token(handle)}"
        members = procinfo.live_members(pgid)
        if any(procinfo.environ_has(pid, token) for pid in members):
            return True
        leader_start = procinfo.start_time(pgid) if pgid in members else None
        return leader_start is not None and abs(leader_start - handle.started_at) < 2.0

    def _signal_group(self, pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_group_gone(self, handle: ProcessHandle, pgid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self._reap_nowait(handle)
            if not procinfo.live_members(pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _reap_nowait(self, handle: ProcessHandle) -> None:
        proc = self._children.get(handle.pid or -1)
        if proc is not None:
            proc.poll()

    def _reap(self, handle: ProcessHandle) -> int | None:
        proc = self._children.get(handle.pid or -1)
        if proc is None:
            return None
        try:
            return proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            return None


def _copy(src: str, dst: str) -> None:
    source = Path(src)
    target = Path(dst)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)
