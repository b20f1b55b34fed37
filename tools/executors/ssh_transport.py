"""One OpenSSH connection to a node: the system `ssh` client behind a ControlMaster.

The system `ssh` (not a Python library) so that whatever already reaches the node
works unchanged: ~/.ssh/config, keys, the agent, ProxyJump.  One ControlMaster per
connection (socket in a short /tmp path: sun_path is ~100 bytes) makes each call a
few milliseconds; it persists 10 min after its last use, so a killed controller
does not leak it for long.  Port forwards go through the same master.  What runs over
it (processes, files, the workdir) is `tools.executors.ssh`'s.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Sequence
from typing import IO, Any

from campaign.domain.redact import redact_text
from tools.executors.base import NodeError

__all__ = ["SshError", "SshTransport"]


class SshError(NodeError):
    """The node could not be reached or the ssh transport itself failed (exit 255)."""


class SshTransport:
    """Shell scripts, forwards and the resolved address of one host, over one master."""

    def __init__(
        self,
        host: str,
        user: str | None = None,
        port: int | None = None,
        identity_file: str | None = None,
        ssh_options: Sequence[str] = (),
        connect_timeout_s: float = 15.0,
    ) -> None:
        self.target = host
        self.user, self.port, self.identity_file = user, port, identity_file
        self.ssh_options = list(ssh_options)
        self.connect_timeout_s = connect_timeout_s
        self._control_dir = f"/tmp/cmp-ssh-{os.getuid()}-{secrets.token_hex(4)}"  # made by connect()
        self.control_path = os.path.join(self._control_dir, "m")
        self._address: str | None = None
        self._tunnels: dict[int, int] = {}

    def _common(self) -> list[str]:
        opts = [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={int(self.connect_timeout_s)}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
            "-o",
            f"ControlPath={self.control_path}",
        ]
        if self.port:
            opts += ["-p", str(self.port)]
        if self.identity_file:
            opts += ["-i", self.identity_file]
        if self.user:
            opts += ["-l", self.user]
        return opts + self.ssh_options

    def ssh_argv(self, *extra: str) -> list[str]:
        """An `ssh` command line that goes through this executor's master."""
        return ["ssh", *self._common(), "-o", "ControlMaster=no", *extra, self.target]

    def master_alive(self) -> bool:
        if not os.path.exists(self.control_path):
            return False
        check = subprocess.run(["ssh", *self._common(), "-O", "check", self.target], capture_output=True, timeout=10)
        return check.returncode == 0

    def connect(self) -> None:
        """Start the ControlMaster (idempotent).  Its stderr goes to a file: a
        backgrounded master holding a pipe would hang the caller's read."""
        if self.master_alive():
            return
        os.makedirs(self._control_dir, mode=0o700, exist_ok=True)
        err_path = os.path.join(self._control_dir, "master.err")
        with open(err_path, "wb") as err:
            proc = subprocess.run(
                [
                    "ssh",
                    *self._common(),
                    "-o",
                    "ControlMaster=yes",
                    "-o",
                    "ControlPersist=600",
                    "-N",
                    "-f",
                    self.target,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                timeout=self.connect_timeout_s + 15,
            )
        if proc.returncode != 0:
            with open(err_path, "rb") as f:
                message = redact_text(f.read().decode(errors="replace").strip())
            raise SshError(f"ssh {self.target}: cannot connect (exit {proc.returncode}): {message}")

    def _ssh(
        self, script: str, *, timeout: float, stdin: bytes | int | IO[bytes] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a shell script on the node; bytes out.  Raises SshError on transport failure."""
        self.connect()
        argv = self.ssh_argv("-T") + ["--", script]
        kw: dict[str, Any] = (
            {"input": stdin}
            if isinstance(stdin, bytes)
            else {"stdin": stdin if stdin is not None else subprocess.DEVNULL}
        )
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, **kw)
        if proc.returncode == 255:
            raise SshError(f"ssh {self.target}: {redact_text(proc.stderr.decode(errors='replace').strip())}")
        return proc

    def _sh(self, script: str, *, timeout: float = 30.0, stdin: bytes | None = None) -> str:
        proc = self._ssh(script, timeout=timeout, stdin=stdin)
        if proc.returncode != 0:
            raise SshError(
                f"ssh {self.target}: remote command failed ({proc.returncode}): "
                f"{redact_text(proc.stderr.decode(errors='replace').strip())}"
            )
        return proc.stdout.decode(errors="replace")

    @property
    def host(self) -> str:
        """The address servers on the node listen on, resolved like ssh does (`ssh -G`)."""
        if self._address is None:
            out = subprocess.run(
                ["ssh", "-G", *self._common(), self.target], capture_output=True, text=True, timeout=10
            ).stdout
            names = [ln.split(None, 1)[1] for ln in out.splitlines() if ln.startswith("hostname ")]
            self._address = names[0].strip() if names else self.target
        return self._address

    def tunnel(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Forward a local port to `remote_host:remote_port` as seen from the node
        (through the master), so a load sweep can run on the controller."""
        if remote_port in self._tunnels:
            return self._tunnels[remote_port]
        self.connect()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            local_port: int = s.getsockname()[1]
        spec = f"127.0.0.1:{local_port}:{remote_host}:{remote_port}"
        proc = subprocess.run(
            ["ssh", *self._common(), "-O", "forward", "-L", spec, self.target], capture_output=True, timeout=30
        )
        if proc.returncode != 0:
            raise SshError(f"ssh {self.target}: cannot forward {spec}: {proc.stderr.decode(errors='replace').strip()}")
        self._tunnels[remote_port] = local_port
        return local_port

    def close(self) -> None:
        """Stop the master (and with it every tunnel); processes on the node keep running."""
        if os.path.exists(self.control_path):
            subprocess.run(["ssh", *self._common(), "-O", "exit", self.target], capture_output=True, timeout=15)
        self._tunnels.clear()
        shutil.rmtree(self._control_dir, ignore_errors=True)
