"""Run the simulated node on a remote host: the controller's own code, shipped.

`python -m tools.simnode` on an ssh host or a Slurm node needs the project's code
and a Python with its dependencies.  The interpreter is the node spec's `python:`
(a venv that has the dependencies; it may have the project installed too).  The
code is the controller's: its `campaign/` and `tools/` packages are copied with
the executor's `put` into `<workdir>/code-<digest>` (content-addressed: shipped
once per code version, never a stale mix) and every command and server started
through this executor gets `PYTHONPATH` pointing there, so the node runs exactly
the code that measures it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from campaign.domain.models import CommandResult, ProcessHandle
from tools.executors.base import Executor

#: the packages a node needs; the tree they live in is the controller's.
PACKAGES = ("campaign", "tools")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def code_digest(root: Path | None = None) -> str:
    """A digest of every shipped file (path and bytes)."""
    root = root or project_root()
    h = hashlib.sha256()
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class WithProjectCode:
    """An Executor that ships the project code to the node once and runs every
    command with it importable.  Everything else is the wrapped executor's."""

    def __init__(self, inner: Executor, node_workdir: str) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.node_workdir = node_workdir
        self._code_dir: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def host(self) -> str:
        return self.inner.host

    def code_dir(self) -> str:
        """The node path that holds the shipped packages (shipped on first use)."""
        if self._code_dir is None:
            target = str(PurePosixPath(self.node_workdir) / f"code-{code_digest()}")
            marker = str(PurePosixPath(target) / ".complete")
            if self.inner.run(["test", "-f", marker], timeout=60).returncode != 0:
                with tempfile.TemporaryDirectory(prefix="campaign-code-") as tmp:
                    for pkg in PACKAGES:
                        shutil.copytree(project_root() / pkg, Path(tmp) / pkg, ignore=_SKIP)
                    self.inner.put(tmp, target)
                done = self.inner.run(["sh", "-c", f"chmod -R a+rX {target} && touch {marker}"], timeout=60)
                if done.returncode != 0:
                    raise RuntimeError(f"shipping the project code to {target}: {done.stderr.strip()}")
            self._code_dir = target
        return self._code_dir

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**(env or {}), "PYTHONPATH": self.code_dir()}

    def run(
        self, argv: list[str], *, timeout: float = 60.0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        return self.inner.run(argv, timeout=timeout, env=self._env(env), cwd=cwd)

    def start(
        self,
        argv: list[str],
        *,
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        base_env: Sequence[str] | None = None,
    ) -> ProcessHandle:
        return self.inner.start(argv, log_path=log_path, env=self._env(env), cwd=cwd, base_env=base_env)

    def poll(self, handle: ProcessHandle) -> int | None:
        return self.inner.poll(handle)

    def read_log(self, handle: ProcessHandle, offset: int = 0) -> tuple[str, int]:
        return self.inner.read_log(handle, offset)

    def tail(self, handle: ProcessHandle, lines: int = 50) -> list[str]:
        return self.inner.tail(handle, lines)

    def stop(self, handle: ProcessHandle, *, grace_s: float = 10.0) -> int | None:
        return self.inner.stop(handle, grace_s=grace_s)

    def put(self, local_path: str, remote_path: str) -> None:
        self.inner.put(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        self.inner.get(remote_path, local_path)

    def free_port(self) -> int:
        return self.inner.free_port()

    def close(self) -> None:
        self.inner.close()
