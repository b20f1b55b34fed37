"""Run the campaign's processes on a remote GPU node over the system OpenSSH client:
the `ssh` node kind (its playbook spec and its executor).

The connection itself (one ControlMaster, scripts, forwards) is
`tools.executors.ssh_transport`'s.  Long-lived processes are started detached (`setsid`) under a
watcher (remote_shell.WATCHER) that records pid and exit status next to the log, so nothing
depends on the ssh channel staying open, and a fresh executor (after the controller
died) can still poll, read and stop them from the handle alone.  Stop signals the
remote group by pid: signals sent over an ssh channel are refused for root.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import IO, ClassVar, Literal

from pydantic import Field

from campaign.domain.errors import UserError
from campaign.domain.models import CommandResult, ProcessHandle
from campaign.domain.redact import redact_argv
from campaign.playbook.nodes import NodeSpecBase, SimulatedNodeSpec
from tools.executors.base import LAUNCH_TOKEN_ENV
from tools.executors.remote_shell import (
    KILLED,
    MAX_LOG_CHUNK,
    command_line,
    decode_complete,
    env_spec_bytes,
    env_spec_path,
    export_lines,
    parse_status,
    pid_path,
    private_dir_problem,
    private_dir_script,
    rc_path,
    watcher_argv,
)
from tools.executors.ssh_transport import SshError, SshTransport

__all__ = ["SshError", "SshExecutor", "SshNodeSpec"]

#: shell functions: is a pid / a process group alive (zombies are not), via procps `ps`.
_ALIVE = (
    "alive() { ps -o stat= -p \"$1\" 2>/dev/null | grep -qv '^Z'; }; "
    "galive() { ps -e -o pgid=,stat= | awk -v g=\"$1\" '$1 == g && $2 !~ /^Z/ {f = 1} END {exit !f}'; };"
)


class SshNodeSpec(NodeSpecBase):
    remote: ClassVar[bool] = True
    kind: Literal["ssh"] = Field(
        description="another machine, reached with the system OpenSSH client", examples=["ssh"]
    )
    name: str = Field(
        default="", description="the node's name (default: its host); needed to tell two nodes on one host apart"
    )
    host: str = Field(description="host name or ~/.ssh/config alias", examples=["gpu-1"])
    user: str | None = Field(default=None, description="login user (default: ssh's own choice)", examples=["bench"])
    port: int | None = Field(default=None, description="ssh port (default: ssh's own choice)", examples=[2222])
    identity_file: str | None = Field(
        default=None, description="private key file passed as `-i`", examples=["~/.ssh/id_ed25519"]
    )
    ssh_options: list[str] = Field(
        default_factory=list, description="extra `-o` options for ssh", examples=[["StrictHostKeyChecking=accept-new"]]
    )
    workdir: str = Field(
        default="~/.cache/campaign-node",
        description="the node's working directory: logs, "
        "ledger, the environment file of a launch; `~/` is the node user's home; made 0700, "
        "refused when another user's or writable by others",
    )
    python: str = Field(
        default="python3",
        description="the interpreter on the node that runs campaign's node "
        "helpers (and the engine, unless server.python says otherwise)",
    )
    sweep_on: Literal["node", "controller"] = Field(
        default="node",
        description=(
            "where the load generator runs: next to the server (`campaign bench` on the node) or on this machine"
        ),
    )
    simulated: SimulatedNodeSpec | None = Field(
        default=None, description="run the simulated node on that host instead of a real engine"
    )

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self.simulated

    def sweep_location(self) -> str:
        return self.sweep_on

    def node_name(self) -> str:
        return self.name or self.host

    def describe(self) -> str:
        return f"ssh {self.host}"

    def where(self) -> str:
        return (
            f"ssh: the command below runs on {self.host} over ssh, in {self.workdir} "
            f"(its env through the channel's stdin, never on a command line)"
        )


class SshExecutor(SshTransport):
    """An `Executor` for one host reachable with `ssh`."""

    kind = "ssh"

    def __init__(
        self,
        host: str,
        user: str | None = None,
        port: int | None = None,
        identity_file: str | None = None,
        ssh_options: Sequence[str] = (),
        workdir: str = "~/.cache/campaign-node",
        python: str = "python3",
        connect_timeout_s: float = 15.0,
    ) -> None:
        super().__init__(host, user, port, identity_file, ssh_options, connect_timeout_s)
        self.workdir_setting, self.python = workdir, python
        self._workdir: str | None = None  # resolved and checked on first use

    @classmethod
    def from_spec(cls, spec: SshNodeSpec) -> SshExecutor:
        """The registry's builder; UserError for a key file or port that cannot work."""
        identity = os.path.expanduser(spec.identity_file) if spec.identity_file else None
        if identity and not os.path.isfile(identity):
            raise UserError(
                f"playbook: node.identity_file: no such file '{spec.identity_file}' "
                f"(fix: point it at the private key, or remove it to use ~/.ssh/config and the agent)"
            )
        if spec.port is not None and not 0 < spec.port < 65536:
            raise UserError(f"playbook: node.port: {spec.port} is not a TCP port (fix: 1-65535, usually 22)")
        return cls(
            spec.host,
            user=spec.user,
            port=spec.port,
            identity_file=identity,
            ssh_options=spec.ssh_options,
            workdir=spec.workdir,
            python=spec.python,
        )

    def _abs(self, path: str) -> str:
        return path if PurePosixPath(path).is_absolute() else str(PurePosixPath(self.workdir) / path)

    @property
    def workdir(self) -> str:
        """The node's workdir (`~/` is the node user's home), made 0700 on first use and
        refused (UserError, one line) when it is another user's, a link or writable by
        others: another user there could read or replace a candidate's log."""
        if self._workdir is None:
            path = self.workdir_setting
            if path == "~" or path.startswith("~/"):
                path = self._sh('printf %s "$HOME"').strip() + path[1:]
            problem = private_dir_problem(path, self._sh(private_dir_script(path)))
            if problem:
                raise UserError(f"ssh {self.target}: {problem}")
            self._sh(f"chmod 700 {shlex.quote(path)}")
            self._workdir = path
        return self._workdir

    # ----------------------------------------------------------------- Executor
    def run(
        self, argv: list[str], *, timeout: float = 60.0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        """Run to completion on the node.  The remote side is bounded by `timeout`
        too, so a timed-out command does not linger there; status 124 on timeout."""
        wd = self._abs(cwd) if cwd else self.workdir
        inner = command_line(argv)
        exports = export_lines(env)  # over stdin: a command line is visible in `ps`
        script = (
            f"mkdir -p {shlex.quote(self.workdir)} && cd {shlex.quote(wd)} && "
            + ('eval "$(cat)" && ' if exports else "")
            + f"exec timeout -k 2 {max(timeout, 0.1):.1f} sh -c {shlex.quote(inner)}"
        )
        try:
            proc = self._ssh(script, timeout=timeout + 10, stdin=exports.encode() if exports else None)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(
                returncode=124,
                stdout=(exc.stdout or b"").decode(errors="replace"),
                stderr=f"timed out after {timeout:g} s",
            )
        return CommandResult(
            returncode=proc.returncode,
            stdout=proc.stdout.decode(errors="replace"),
            stderr=proc.stderr.decode(errors="replace"),
        )

    def start(
        self,
        argv: list[str],
        *,
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        base_env: Sequence[str] | None = None,
    ) -> ProcessHandle:
        """The environment goes over the channel's stdin into a 0600 file in a 0700
        directory, which the watcher reads and deletes before it starts the command:
        never on a command line (`ps` on the node, and here: the ssh client's argv)."""
        log = self._abs(log_path)
        spec = env_spec_path(self.workdir, log)
        spec_dir = str(PurePosixPath(spec).parent)
        watcher = shlex.join(
            watcher_argv(self.python, argv, log_path=log, env_spec=spec, cwd=self._abs(cwd) if cwd else self.workdir)
        )
        q = shlex.quote
        script = (
            f"mkdir -p {q(self.workdir)} {q(str(PurePosixPath(log).parent))} && "
            f"rm -f {q(rc_path(log))} {q(pid_path(log))} || exit 1; "
            f"(umask 077 && mkdir -p {q(spec_dir)} && chmod 700 {q(spec_dir)} && cat > {q(spec)}) || exit 1; "
            f"find {q(spec_dir)} -name '*.json' -mmin +10 -delete 2>/dev/null; "  # left by a killed start
            f"setsid {watcher} >> {q(log)} 2>&1 < /dev/null & "
            f"i=0; while [ ! -s {q(pid_path(log))} ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done; "
            f"rm -f {q(spec)}; cat {q(pid_path(log))}"
        )
        out = self._sh(script, timeout=30, stdin=env_spec_bytes(env, base_env)).strip()
        try:
            pid: int | None = int(out.splitlines()[-1]) or None  # 0: could not exec, status 127 recorded
        except (ValueError, IndexError) as exc:
            raise SshError(f"ssh {self.target}: process did not start (no pid in {pid_path(log)})") from exc
        return ProcessHandle(
            executor=self.kind,
            pid=pid,
            pgid=pid,
            host=self.host,
            log_path=log,
            started_at=time.time(),
            command=redact_argv(argv, env),
        )

    def _status_script(self, handle: ProcessHandle) -> str:
        """Prints `running`, the recorded status, or `gone`.  Zombies count as ended;
        a just-ended process gets a moment for the watcher to write its status."""
        rc = shlex.quote(rc_path(handle.log_path))
        return (
            f"{_ALIVE} if alive {handle.pid}; then echo running; else i=0; "
            f"while [ ! -s {rc} ] && [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; "
            f"if [ -s {rc} ]; then cat {rc}; else echo gone; fi; fi"
        )

    def poll(self, handle: ProcessHandle) -> int | None:
        out = self._sh(self._status_script(handle), timeout=30).strip()
        if out == "running":
            return None
        if out == "gone":
            return KILLED
        status = parse_status(out)
        return KILLED if status is None else status

    def read_log(self, handle: ProcessHandle, offset: int = 0) -> tuple[str, int]:
        log = shlex.quote(handle.log_path)
        proc = self._ssh(f"[ -f {log} ] && tail -c +{offset + 1} {log} | head -c {MAX_LOG_CHUNK}", timeout=60)
        text, used = decode_complete(proc.stdout)
        return text, offset + used

    def tail(self, handle: ProcessHandle, lines: int = 50) -> list[str]:
        log = shlex.quote(handle.log_path)
        proc = self._ssh(f"[ -f {log} ] && tail -n {int(lines)} {log}", timeout=60)
        return proc.stdout.decode(errors="replace").splitlines()

    def stop(self, handle: ProcessHandle, *, grace_s: float = 10.0) -> int | None:
        """TERM the remote group by pgid, KILL it after `grace_s`: one round trip."""
        g, ticks = handle.pgid or handle.pid, max(1, int(grace_s * 10))
        if not g:  # never started (exec failed): nothing to signal
            return self.poll(handle)
        script = (
            f"{_ALIVE} kill -TERM -{g} 2>/dev/null; i=0; "
            f"while galive {g} && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done; "
            f"if galive {g}; then kill -KILL -{g} 2>/dev/null; i=0; "
            f"while galive {g} && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; fi; " + self._status_script(handle)
        )
        out = self._sh(script, timeout=grace_s + 30).strip()
        status = parse_status(out)
        return KILLED if status is None else status

    def put(self, local_path: str, remote_path: str) -> None:
        """Copy a file, or a directory's contents into `remote_path`, through the master."""
        dest = shlex.quote(self._abs(remote_path))
        if os.path.isdir(local_path):
            tar = subprocess.Popen(["tar", "-C", local_path, "-cf", "-", "."], stdout=subprocess.PIPE)
            assert tar.stdout is not None  # stdout=PIPE
            try:
                proc = self._ssh(f"mkdir -p {dest} && tar -C {dest} -xf -", timeout=600, stdin=tar.stdout)
            finally:
                tar.stdout.close()
                tar.wait()
        elif os.path.isfile(local_path):
            with open(local_path, "rb") as f:
                proc = self._ssh(f'mkdir -p "$(dirname {dest})" && cat > {dest}', timeout=600, stdin=f.fileno())
        else:
            raise FileNotFoundError(local_path)
        if proc.returncode != 0:
            raise SshError(
                f"put {local_path} -> {self.target}:{remote_path}: {proc.stderr.decode(errors='replace').strip()}"
            )

    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a remote file, or a directory's contents into `local_path`."""
        src = shlex.quote(self._abs(remote_path))
        kind = self._sh(
            f"if [ -d {src} ]; then echo dir; elif [ -f {src} ]; then echo file; else echo none; fi"
        ).strip()
        if kind == "none":
            raise FileNotFoundError(f"{self.target}:{remote_path}")
        if kind == "dir":
            os.makedirs(local_path, exist_ok=True)
            with tempfile.TemporaryFile() as buf:
                self._copy_out(f"tar -C {src} -cf - .", buf, remote_path)
                buf.seek(0)
                subprocess.run(["tar", "-C", local_path, "-xf", "-"], stdin=buf, check=True)
            return
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        tmp = local_path + ".part"
        with open(tmp, "wb") as f:
            self._copy_out(f"cat {src}", f, remote_path)
        os.replace(tmp, local_path)

    def _copy_out(self, script: str, out: IO[bytes], remote_path: str) -> None:
        self.connect()
        proc = subprocess.run(
            self.ssh_argv("-T") + ["--", script],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=600,
        )
        if proc.returncode != 0:
            raise SshError(f"get {self.target}:{remote_path}: {proc.stderr.decode(errors='replace').strip()}")

    def free_port(self) -> int:
        code = "import socket; s=socket.socket(); s.bind(('',0)); print(s.getsockname()[1])"
        return int(self._sh(f"{shlex.quote(self.python)} -c {shlex.quote(code)}").strip())

    def queue_wait_s(self, handle: ProcessHandle) -> float | None:
        return None  # a process over ssh starts at once

    def find_by_token(self, token: str, *, log_path: str, host: str, command: str = "") -> list[ProcessHandle]:
        """The /proc scan of `procinfo.groups_with_env`, run on the node by its own `sh`
        (no Python needed there)."""
        entry = f"{LAUNCH_TOKEN_ENV}={token}"
        script = (
            "for d in /proc/[0-9]*; do "
            f"if tr '\\0' '\\n' < \"$d/environ\" 2>/dev/null | grep -qxF {shlex.quote(entry)}; then "
            'ps -o pgid= -p "${d#/proc/}"; fi; done; true'
        )
        res = self.run(["sh", "-c", script], timeout=60)
        if res.returncode != 0:
            raise SshError(f"token scan on {self.target} failed: {res.stderr.strip()[:200]}")
        groups = sorted({int(w) for w in res.stdout.split() if w.isdigit()})
        return [
            ProcessHandle(
                executor=self.kind, host=host, log_path=log_path, command=command, pid=g, pgid=g, started_at=0.0
            )
            for g in groups
        ]

    def __enter__(self) -> SshExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
