"""The ports: what the core needs from the world outside, as Protocols.

The core (`campaign.domain`, `playbook`, `loop`, `verdict`, `store`, `journal`,
`planner`) imports these and nothing of `tools/`; the adapters in `tools/` implement
them, and the composition root (`campaign.cli.wiring`) plugs one adapter into each
port.  A test or a bench plugs in its own (an in-process node, a generator of
measurements), which is how the verdict lab drives the real graph without a server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from campaign.domain.measurement import Measurement
from campaign.domain.models import EffectiveConfig, Fingerprint, WorkloadSpec
from campaign.domain.source import PatchRecord, PatchRules

__all__ = ["Clock", "EventSink", "Node", "SourceTree", "SourceTreeFactory"]


@runtime_checkable
class Node(Protocol):
    """One machine that serves the engine: read its environment, launch one config,
    measure the workloads, stop it.  The server is stopped on every exit path; a
    failure is data in the `Measurement` (classified, with evidence), never an exception."""

    name: str

    def fingerprint(self) -> Fingerprint:
        """The node's environment (GPU, driver, CUDA, engine and library versions)."""
        ...

    def measure(
        self,
        config: EffectiveConfig,
        workloads: list[WorkloadSpec],
        *,
        label: str,
        correctness_prompts: list[str] | None = None,
        correctness_tokens: int = 16,
        source: str | None = None,
    ) -> Measurement:
        """Launch `config` (from the source tree at path `source`, when the playbook
        names one), run every workload, stop; what happened."""
        ...


@runtime_checkable
class SourceTree(Protocol):
    """The engine's git repository on one node.  The user's checkout is only read:
    every launch runs from a `git worktree` of a commit (the base `ref`, or a commit of
    the patches on `campaign/<campaign>/<hypothesis>`), removed after the launch."""

    def check(self, patch_text: str, rules: PatchRules) -> list[str]:
        """Why the patch may not be applied: the paths git would write (outside
        `rules.allowed_paths`, `.git*`), unsafe shapes (symlink, executable, submodule,
        binary), or a patch that does not apply to the base; [] when acceptable."""
        ...

    def resolve(self, ref: str) -> str:
        """The commit SHA of `ref`; `UserError` naming `server.source.ref` when unknown."""
        ...

    def commit(self, base: str, patches: list[str], branch: str, rules: PatchRules) -> PatchRecord:
        """The patch files applied in order on `base` and committed on `branch`
        (deterministic: the same inputs give the same SHA); raises `PatchFailed`."""
        ...

    def checkout(self, sha: str, name: str) -> str:
        """A fresh worktree of `sha` named `name` (`<campaign>/<label>`): its path."""
        ...

    def remove(self, path: str) -> None:
        """Remove a worktree made by `checkout` (its branch, if any, stays)."""
        ...

    def reap(self, scope: str) -> list[str]:
        """Remove the worktrees a killed run of campaign `scope` left behind."""
        ...


#: repository path -> its SourceTree; raises `campaign.domain.errors.UserError` when the
#: path is not a repository.
SourceTreeFactory = Callable[[str], SourceTree]

#: progress events for the live view: (kind, data).
EventSink = Callable[[str, dict[str, Any]], None]

#: wall-clock seconds (time.time); tests pass a fake one.
Clock = Callable[[], float]
