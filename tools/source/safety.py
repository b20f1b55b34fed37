"""The one patch safety check: judge exactly the paths git will write.

A hand-written header parser and `git apply` disagree (`--- kernels/setup.py` passes a
`kernels/` rule, but `git apply` strips one component and writes the root `setup.py`),
so the paths come from git itself: `git apply --numstat -z` (what it writes, after
`-p1`; binary files as `-`) and `--summary` (created modes: symlink 120000, submodule
160000, executables).  A path that is a symlink in the base tree is refused too: a
patch to it rewrites where the link points.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from pathlib import PurePosixPath

from pydantic import BaseModel, Field

from campaign.domain.source import PatchRules
from tools.executors.base import CommandResult

__all__ = ["GitRun", "Written", "inspect_patch", "rule_problems"]

#: runs `git ARGS` on the node: ["-C", path, "apply", ...] -> result
GitRun = Callable[[list[str]], CommandResult]

_MODE_CREATE = re.compile(r"^ (?:create|delete) mode (\d{6}) (.+)$")
_MODE_CHANGE = re.compile(r"^ mode change (\d{6}) => (\d{6}) (.+)$")


class Written(BaseModel):
    """What one patch makes git write."""

    paths: list[str] = Field(default_factory=list)  # every path created, changed, deleted or renamed (both sides)
    binary: list[str] = Field(default_factory=list)
    modes: list[tuple[str, str]] = Field(default_factory=list)  # (new mode, summary line)
    symlinks_in_base: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # git could not even parse it


def _numstat(text: str) -> tuple[list[str], list[str]]:
    """Paths and binary paths of `git apply --numstat -z` (renames: "a\\td\\t\\0old\\0new\\0")."""
    fields = text.split("\0")
    paths: list[str] = []
    binary: list[str] = []
    i = 0
    while i < len(fields):
        rec = fields[i]
        i += 1
        if not rec.strip():
            continue
        parts = rec.split("\t", 2)
        if len(parts) < 3:
            continue
        added, _deleted, path = parts
        names = [path] if path else fields[i:i + 2]
        if not path:
            i += 2
        paths += [n for n in names if n]
        if added == "-":
            binary += [n for n in names if n]
    return list(dict.fromkeys(paths)), binary


def inspect_patch(git: GitRun, worktree: str, patch_file: str) -> Written:
    """Ask git (in `worktree`, at the base) what `patch_file` would write."""
    out = Written()
    num = git(["-C", worktree, "apply", "--numstat", "-z", patch_file])
    if num.returncode != 0:
        out.errors = [ln for ln in num.stderr.splitlines() if ln.strip()][:10] or [f"git apply exited {num.returncode}"]
        return out
    out.paths, out.binary = _numstat(num.stdout)
    summ = git(["-C", worktree, "apply", "--summary", patch_file])
    for line in summ.stdout.splitlines():
        m = _MODE_CREATE.match(line)
        if m:
            out.modes.append((m.group(1), line.strip()))
            continue
        m = _MODE_CHANGE.match(line)
        if m:
            out.modes.append((m.group(2), line.strip()))
    if out.paths:
        tree = git(["-C", worktree, "ls-files", "-s", "-z", "--", *out.paths])
        for rec in tree.stdout.split("\0"):
            meta, _, name = rec.partition("\t")
            if meta.startswith("120000 ") and name:
                out.symlinks_in_base.append(name)
    return out


def _allowed(path: str, allowed: list[str]) -> bool:
    for rule in allowed:
        rule = rule.rstrip("/")
        if path == rule or path.startswith(rule + "/") or fnmatch.fnmatchcase(path, rule):
            return True
    return False


def rule_problems(w: Written, rules: PatchRules) -> list[str]:
    """Why git's writes break `rules` (one line each, naming the path and the fix)."""
    if w.errors:
        return ["is not a patch git can read: " + "; ".join(w.errors)[:300]]
    if not w.paths:
        return ["touches no file (fix: give a unified diff with ---/+++ headers)"]
    allow = set(rules.allow)
    problems: list[str] = []
    for path in w.paths:
        parts = PurePosixPath(path).parts
        if path.startswith("/") or ".." in parts or "\\" in path:
            problems.append(f"writes '{path}', outside the repository")
        elif any(p.startswith(".git") for p in parts) and "git_paths" not in allow:
            problems.append(f"writes '{path}', a .git* path (fix: allow: [git_paths] if meant)")
        elif rules.allowed_paths is not None and not _allowed(path, rules.allowed_paths):
            problems.append(f"writes '{path}', outside the allowed paths "
                            f"({', '.join(rules.allowed_paths) or 'none'})")
    for path in w.binary:
        if "binary" not in allow:
            problems.append(f"writes '{path}' as a binary patch (fix: allow: [binary] if meant)")
    for mode, line in w.modes:
        if mode == "120000" and "symlink" not in allow:
            problems.append(f"makes a symlink: {line} (fix: allow: [symlink] if meant)")
        elif mode == "160000" and "submodule" not in allow:
            problems.append(f"adds a submodule: {line} (fix: allow: [submodule] if meant)")
        elif mode == "100755" and "executable" not in allow and not line.startswith("delete"):
            problems.append(f"makes an executable: {line} (fix: allow: [executable] if meant)")
    for path in w.symlinks_in_base:
        if "symlink" not in allow:
            problems.append(f"writes through '{path}', a symlink in the base tree (fix: allow: [symlink] if meant)")
    return problems
