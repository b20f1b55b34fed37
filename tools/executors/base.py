"""The executor Protocol: everything the controller does on a node goes through it.

Shaped so that local processes, an ssh host and a Slurm job fit the same calls:
handles are serializable (a run ledger can reap them after a crash), logs are read
by offset (streamed back over ssh, collected from a Slurm output file), and `stop`
never relies on signals travelling over a channel (as root, sshd refuses them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from campaign.domain.models import CommandResult, ProcessHandle

#: the environment variable that carries a launch's token: the run ledger's intent names it,
#: and the reaper finds a server that never reached the ledger by it (`Executor.find_by_token`)
LAUNCH_TOKEN_ENV = "CAMPAIGN_LAUNCH_TOKEN"


class NodeError(RuntimeError):
    """The node cannot be reached, or refused what was asked of it outside a launch (a
    workdir it cannot create, an interpreter it cannot run, sbatch refused): the user
    fixes the node or its `node:` entry and resumes.  The composition root prints it as
    one line, exit 2; inside a launch the node runtime records it as an infrastructure
    failure instead, which the campaign retries."""


@runtime_checkable
class Executor(Protocol):
    kind: str  # the handle's `executor` field: which executor can act on a handle again

    @property
    def host(self) -> str:
        """Address the controller uses to reach servers started on this node."""

    def run(
        self, argv: list[str], *, timeout: float = 60.0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        """Run a short command to completion on the node."""

    def start(
        self,
        argv: list[str],
        *,
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        base_env: Sequence[str] | None = None,
    ) -> ProcessHandle:
        """Start a long-lived process as the leader of a new process group, stdout and
        stderr appended to `log_path` on the node.  Its environment is the node's
        variables named by `base_env` (None: server_env.DEFAULT_BASE_ENV) plus `env`,
        nothing else; `env` never travels on a command line or stays in a file."""

    def poll(self, handle: ProcessHandle) -> int | None:
        """Exit status if the process has ended, else None."""

    def read_log(self, handle: ProcessHandle, offset: int = 0) -> tuple[str, int]:
        """Log text from byte `offset`; returns (text, next offset)."""

    def tail(self, handle: ProcessHandle, lines: int = 50) -> list[str]:
        """The last `lines` lines of the log."""

    def stop(self, handle: ProcessHandle, *, grace_s: float = 10.0) -> int | None:
        """TERM the whole process group, KILL after `grace_s`; returns the exit status."""

    def put(self, local_path: str, remote_path: str) -> None:
        """Copy a file or directory to the node."""

    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the node."""

    def free_port(self) -> int:
        """A TCP port that is free on the node now."""

    def queue_wait_s(self, handle: ProcessHandle) -> float | None:
        """Seconds the launch waited for the node before it ran (a batch queue); None: no queue."""

    def find_by_token(self, token: str, *, log_path: str, host: str, command: str = "") -> list[ProcessHandle]:
        """Handles of the launch started with `token` in its environment (`LAUNCH_TOKEN_ENV`),
        for a ledger entry that knows only the intent (the controller died between spawn and
        pid); [] when the spawn never happened or the server is gone.  Raises when the node
        cannot be asked."""

    def close(self) -> None:
        """Release connections (ssh master, tunnels)."""
