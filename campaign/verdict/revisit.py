"""When is a dead end worth retrying?  When an environment component that could have
caused it changed: a JIT error may go away with a new CUDA toolchain, an OOM with a
new engine version or a bigger GPU.  Components are `Fingerprint.components()` keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from campaign.domain.models import FailureClass, Fingerprint
from campaign.domain.records import DeadEnd

_TOOLCHAIN = ["cuda", "arch", "engine_version"]

#: which components can plausibly cure a failure of each class.
FAILURE_COMPONENTS: dict[FailureClass, list[str]] = {
    FailureClass.jit_error: _TOOLCHAIN,
    FailureClass.unsupported_arch: _TOOLCHAIN,
    FailureClass.cuda_graph_incompatible: ["cuda", "nccl"],
    FailureClass.nccl_error: ["cuda", "nccl"],
    FailureClass.oom: ["engine_version", "gpu"],
    FailureClass.assertion: ["engine_version", "gpu"],
    FailureClass.incorrect: ["engine_version", "cuda"],
    FailureClass.bad_flag: ["engine_version"],
    FailureClass.exited: ["engine_version"],
    FailureClass.health_timeout: ["engine_version"],
    FailureClass.hang: ["engine_version"],
    FailureClass.server_error: ["engine_version"],
    FailureClass.engine_dead: ["engine_version"],
    FailureClass.kernel_fault: ["engine_version", "cuda", "gpu"],
    FailureClass.environment: ["engine_version", "cuda"],
    FailureClass.patch_conflict: ["engine_sha"],
    FailureClass.stack_conflict: ["engine_sha"],
    FailureClass.patch_refused: [],
    # infrastructure failures are retried, never dead ends
    FailureClass.port_in_use: [],
    FailureClass.unreachable: [],
}


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def revisit_components(failure_class: FailureClass | None, declared: Sequence[str]) -> list[str]:
    """The failure class's components followed by what the hypothesis declared."""
    implied = FAILURE_COMPONENTS.get(failure_class, []) if failure_class is not None else []
    return _unique([*implied, *declared])


def _changed(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Keys whose known values differ; an empty or missing value is unknown, not a change."""
    return [k for k in _unique([*old, *new]) if old.get(k) and new.get(k) and old[k] != new[k]]


def changed_components(old: Fingerprint, new: Fingerprint) -> list[str]:
    return _changed(old.components(), new.components())


def fills_in(old: Fingerprint, new: Fingerprint) -> bool:
    """`new` is `old` with components that were unknown now read (a campaign begun before
    its node's probe read the engine's version): the same environment, better known."""
    a, b = {**old.components(), "host": old.host}, {**new.components(), "host": new.host}
    return all(not a.get(k) for k in _unique([*a, *b]) if a.get(k, "") != b.get(k, ""))


def reopenable(dead_ends: Sequence[DeadEnd], changed: Sequence[str]) -> list[DeadEnd]:
    """Dead ends, not already reopened, whose revisit condition names a changed component."""
    changed_set = set(changed)
    return [d for d in dead_ends if not d.reopened and changed_set.intersection(d.revisit_on)]


def reopenable_since_recorded(dead_ends: Sequence[DeadEnd], current: Fingerprint) -> list[DeadEnd]:
    """Like `reopenable`, but each dead end is compared with the environment it was
    recorded in (`DeadEnd.environment`), so a change and a change back reopen nothing."""
    now = current.components()
    return [d for d in dead_ends if not d.reopened and set(_changed(d.environment, now)).intersection(d.revisit_on)]
