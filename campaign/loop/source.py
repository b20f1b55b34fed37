"""Which code a launch runs: the graph's side of the `SourceTree` port.

With `server.source` set, every launch runs from a worktree of one commit: the base
`ref` for a plain baseline, or the commit of the patches (adopted wins' patches first,
in queue order, then the hypothesis' own) on `campaign/<campaign>/<hypothesis>`.  The
worktree lives for one launch and is removed on every exit path; the commit is the
record.  Without `server.source` nothing here touches git.
"""

from __future__ import annotations

import hashlib
from typing import Any

from campaign.domain.measurement import Measurement
from campaign.domain.models import EffectiveConfig, FailureClass, WorkloadSpec
from campaign.domain.source import PatchFailed, PatchRecord
from campaign.loop.deps import Deps
from campaign.loop.state import CampaignState
from campaign.playbook.schema import HypothesisSpec
from campaign.ports import SourceTree

__all__ = ["base_sha", "baseline_side_patches", "measure_from", "prepare", "spec_patches", "tree_of"]


def tree_of(d: Deps, state: CampaignState) -> SourceTree | None:
    if d.playbook.server.source is None or not d.trees:
        return None
    return d.trees[min(state.get("node_index") or 0, len(d.trees) - 1)]


def spec_patches(spec: HypothesisSpec) -> list[str]:
    """A hypothesis' own patches: the stack check's several, or its one."""
    return list(spec.stack_patches) or ([spec.patch] if spec.patch else [])


def baseline_side_patches(state: CampaignState) -> list[str]:
    """What the comparison side runs with: the adopted wins' patches, or none when the
    experiment names its own reference (the stack check compares with the original)."""
    if (state.get("current") or {}).get("reference_config"):
        return []
    return list(state.get("baseline_patches") or [])


def _branch(cid: str, name: str, patches: list[str]) -> str:
    if name != "baseline":
        return f"campaign/{cid}/{name}"
    return f"campaign/{cid}/baseline-" + hashlib.sha256("\n".join(patches).encode()).hexdigest()[:8]


def base_sha(d: Deps, state: CampaignState) -> str:
    """The commit `server.source.ref` names now ("" without a source tree): the node's
    fingerprint carries it as `engine_sha`, so a moved base is a new environment (the
    baseline measured again) and re-opens the dead ends its old commit caused (a patch
    that did not apply: `patch_conflict`)."""
    tree, src = tree_of(d, state), d.playbook.server.source
    return tree.resolve(src.ref) if tree is not None and src is not None else ""


def prepare(d: Deps, state: CampaignState, name: str, patches: list[str]) -> PatchRecord | None:
    """The commit `name` runs from: the base of `server.source.ref`, or a commit of
    `patches` on it.  None without a source tree; raises `PatchFailed`."""
    tree, src = tree_of(d, state), d.playbook.server.source
    if tree is None or src is None:
        if patches:  # never measure unpatched code under a patch's name
            raise PatchFailed(
                FailureClass.patch_refused,
                f"'{name}' has a patch but there is no source tree to "
                "apply it to (fix: set server.source in the playbook and run from {source})",
            )
        return None
    base = tree.resolve(src.ref)
    if not patches:
        return PatchRecord(sha=base, base=base)
    return tree.commit(base, patches, _branch(state["campaign_id"], name, patches), src.rules())


def measure_from(
    d: Deps,
    state: CampaignState,
    sha: str | None,
    config: EffectiveConfig,
    workloads: list[WorkloadSpec],
    *,
    label: str,
    **kw: Any,
) -> Measurement:
    """`node.measure` from a fresh worktree of `sha` (removed afterwards, whatever happens)."""
    node = d.nodes[state.get("node_index") or 0]
    tree = tree_of(d, state)
    if tree is None or sha is None:
        return node.measure(config, workloads, label=label, **kw)
    path = tree.checkout(sha, f"{state['campaign_id']}/{label}")
    try:
        return node.measure(config, workloads, label=label, source=path, **kw)
    finally:
        tree.remove(path)


def failed(exc: PatchFailed) -> Measurement:
    return Measurement(failure=exc.failure)
