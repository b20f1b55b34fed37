"""May a model-written patch even be shown for approval?

Only what git itself says the diff writes counts (one implementation of that check,
the `SourceTree` adapter's: the diff applied to a scratch index in a worktree of
`knobs.patches.repo`, both sides of every rename and copy): paths under `knobs.patches.allowed_paths`, no symlink,
executable, submodule, `.git*` or binary change, and the diff must apply cleanly.
Checking never changes the repository; applying happens later, after approval.
"""

from __future__ import annotations

from campaign.domain.errors import UserError
from campaign.domain.source import PatchRules
from campaign.playbook.schema import PatchPolicy
from campaign.ports import SourceTreeFactory


def apply_check(diff: str, policy: PatchPolicy, source: SourceTreeFactory | None) -> list[str]:
    """The adapter's check of the diff in `policy.repo`; [] when acceptable.  Without a
    source adapter the patch cannot be checked, so it is refused, never waved through."""
    if source is None:
        return ["patch cannot be checked: no source-tree adapter is configured"]
    try:
        tree = source(policy.repo)
    except UserError:
        return [f"knobs.patches.repo '{policy.repo}' is not a git repository"]
    rules = PatchRules(
        allowed_paths=list(policy.allowed_paths), allow=list(policy.allow), max_patch_bytes=policy.max_patch_bytes
    )
    return [f"patch {problem}" for problem in tree.check(diff, rules)]


def patch_problems(diff: str, policy: PatchPolicy | None, source: SourceTreeFactory | None = None) -> list[str]:
    """Why the diff may not be proposed (the playbook allows no patches, or git's check)."""
    if policy is None:
        return ["patches are not allowed: the playbook declares no knobs.patches"]
    if not diff.strip():
        return ["patch is empty (fix: give a unified diff)"]
    return apply_check(diff, policy, source)
