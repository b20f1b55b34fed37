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

    def measure(self, config: EffectiveConfig, workloads: list[WorkloadSpec], *, label: str,
                correctness_prompts: list[str] | None = None, correctness_tokens: int = 16) -> Measurement:
        """Launch `config`, run every workload, stop; what happened."""
        ...


@runtime_checkable
class SourceTree(Protocol):
    """The engine's source repository, as far as vetting a proposed patch needs it."""

    def check(self, patch_text: str, allowed_paths: list[str]) -> list[str]:
        """Why the patch may not be applied (paths git would write outside `allowed_paths`
        globs, or a patch that does not apply); [] when it is acceptable."""
        ...


#: repository path -> its SourceTree; raises `campaign.domain.errors.UserError` when the
#: path is not a repository.
SourceTreeFactory = Callable[[str], SourceTree]

#: progress events for the live view: (kind, data).
EventSink = Callable[[str, dict[str, Any]], None]

#: wall-clock seconds (time.time); tests pass a fake one.
Clock = Callable[[], float]
