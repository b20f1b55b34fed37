"""May a model-written patch even be shown for approval?

Only files under `knobs.patches.allowed_paths` may be touched, and the diff must
apply cleanly (`git apply --check`) to `knobs.patches.repo`.  Checking never
changes the repository; applying happens later, after a human approved it.
"""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

from campaign.domain.errors import UserError
from campaign.playbook.schema import PatchPolicy
from campaign.ports import SourceTreeFactory

_HEADER_PREFIXES = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")


def _strip_side(path: str) -> str:
    path = path.split("\t", 1)[0].strip()
    if path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def patch_paths(diff: str) -> list[str]:
    """Every path a unified diff names (old and new sides, renames, copies)."""
    paths: list[str] = []
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            parts = line[len("diff --git ") :].split(" ")
            if len(parts) == 2:
                paths += [_strip_side(parts[0]), _strip_side(parts[1])]
            continue
        for prefix in _HEADER_PREFIXES:
            if line.startswith(prefix):
                rest = line[len(prefix) :]
                if rest.strip() != "/dev/null":
                    stripped = _strip_side(rest) if prefix in ("--- ", "+++ ") else rest.strip()
                    paths.append(stripped)
                break
    seen: list[str] = []
    for p in paths:
        if p and p not in seen:
            seen.append(p)
    return seen


def _allowed(path: str, allowed_paths: list[str]) -> bool:
    for allowed in allowed_paths:
        allowed = allowed.rstrip("/")
        if path == allowed or path.startswith(allowed + "/") or fnmatch.fnmatchcase(path, allowed):
            return True
    return False


def path_problems(diff: str, policy: PatchPolicy | None) -> list[str]:
    """Why the diff may not be proposed, judging by the paths it touches (pure)."""
    if policy is None:
        return ["patches are not allowed: the playbook declares no knobs.patches"]
    paths = patch_paths(diff)
    if not paths:
        return ["patch is not a unified diff (no ---/+++ file headers)"]
    problems = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if path.startswith("/") or ".." in parts or "\\" in path:
            problems.append(f"patch path '{path}' escapes the repository")
        elif not _allowed(path, policy.allowed_paths):
            problems.append(
                f"patch touches '{path}', outside knobs.patches.allowed_paths "
                f"({', '.join(policy.allowed_paths) or 'none'})"
            )
    return problems


def apply_check(diff: str, policy: PatchPolicy, source: SourceTreeFactory | None) -> list[str]:
    """`git apply --check` of the diff in `policy.repo`, through the `SourceTree` port (the
    same adapter that applies it after approval); [] when it applies cleanly.  Without a
    source adapter the patch cannot be checked, so it is refused, never waved through."""
    if source is None:
        return ["patch cannot be checked: no source-tree adapter is configured"]
    try:
        tree = source(policy.repo)
    except UserError:
        return [f"knobs.patches.repo '{policy.repo}' is not a git repository"]
    # the same meaning as `_allowed`: a path, a directory prefix, or a glob
    globs = [g for a in policy.allowed_paths for g in (a.rstrip("/"), a.rstrip("/") + "/*")]
    return [f"patch {problem}" for problem in tree.check(diff, globs)]


def patch_problems(diff: str, policy: PatchPolicy | None, source: SourceTreeFactory | None = None) -> list[str]:
    """Path rules first (cheap, pure); `git apply --check` only for an allowed diff."""
    problems = path_problems(diff, policy)
    if problems or policy is None:
        return problems
    return apply_check(diff, policy, source)
