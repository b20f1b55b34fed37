"""The one patch safety check: judge exactly the paths git will write, both sides.

A hand-written header parser and `git apply` disagree (`--- kernels/setup.py` passes a
`kernels/` rule, but `git apply` strips one component and writes the root `setup.py`),
and `git apply --numstat -z` names only the new side of a rename or copy.  So the
patch is applied into a scratch index (never the worktree) and git itself lists every
path it changed with its old and new mode (`git diff-index --cached --raw -z`, no
rename detection: a rename is the deletion of its source plus the creation of its
target).  Copy and rename sources come from `git apply --summary`, binary patches from
`--numstat`.  A symlink (120000) or submodule (160000) on either side and any new
executable (100755) are refused unless the playbook allows the shape by name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Set as AbstractSet
from typing import Protocol

from pydantic import BaseModel, Field

from campaign.domain.models import CommandResult
from campaign.domain.source import PatchRules

__all__ = ["GitRun", "Written", "inspect_patch", "rule_problems"]


_RENAME_COPY = re.compile(r"^ (rename|copy) (.+) \(\d+%\)$")
_BRACED = re.compile(r"^(.*)\{(.*) => (.*)\}$")


class GitRun(Protocol):
    """Runs `git ARGS` on the node (["-C", path, "apply", ...]) with extra env."""

    def __call__(self, args: list[str], *, env: dict[str, str] | None = None) -> CommandResult: ...


class Change(BaseModel):
    """One path git's scratch index says the patch changes, with both modes
    ("000000": absent on that side)."""

    path: str
    old_mode: str
    new_mode: str


class Written(BaseModel):
    """What one patch makes git write."""

    changes: list[Change] = Field(default_factory=list)
    read_from: list[str] = Field(default_factory=list)  # copy and rename sources
    binary: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # git could not even parse it
    judged: bool = False  # the scratch index took the patch: `changes` is complete

    @property
    def paths(self) -> list[str]:
        return list(dict.fromkeys([c.path for c in self.changes] + self.read_from))


def _raw(text: str) -> list[Change]:
    """`git diff-index --raw -z --no-renames`: ":old new sha sha STATUS\\0path\\0" records."""
    fields = text.split("\0")
    out = []
    for meta, path in zip(fields[0::2], fields[1::2]):
        parts = meta.lstrip(":").split()
        if len(parts) >= 2 and path:
            out.append(Change(path=path, old_mode=parts[0], new_mode=parts[1]))
    return out


def _sources(summary: str) -> list[str]:
    """The source side of every `rename`/`copy` line of `git apply --summary` (git writes
    `pfx{old => new}` when both share leading directories; names are not quoted)."""
    out = []
    for line in summary.splitlines():
        m = _RENAME_COPY.match(line)
        if not m:
            continue
        body = m.group(2)
        braced = _BRACED.match(body)
        if braced:
            out.append(braced.group(1) + braced.group(2))
        elif body.count(" => ") == 1:
            out.append(body.split(" => ")[0])
        else:  # a name holding " => ": the source is ambiguous, refuse by naming the line
            out.append(body)
    return out


def _binary(numstat: str) -> list[str]:
    return [
        rec.split("\t", 2)[2]
        for rec in numstat.split("\0")
        if rec.startswith("-\t-\t") and len(rec.split("\t", 2)) == 3 and rec.split("\t", 2)[2]
    ]


def inspect_patch(git: GitRun, worktree: str, patch_file: str, scratch_index: str) -> Written:
    """Ask git (in `worktree`, at its current index) what `patch_file` would write.
    `scratch_index` is a node path for a throwaway index file."""
    out = Written()
    num = git(["-C", worktree, "apply", "--numstat", "-z", patch_file])
    if num.returncode != 0:
        out.errors = [ln for ln in num.stderr.splitlines() if ln.strip()][:10] or [f"git apply exited {num.returncode}"]
        return out
    out.binary = _binary(num.stdout)
    out.read_from = _sources(git(["-C", worktree, "apply", "--summary", patch_file]).stdout)
    tree = git(["-C", worktree, "write-tree"]).stdout.strip()
    env = {"GIT_INDEX_FILE": scratch_index}
    steps = (["-C", worktree, "read-tree", tree], ["-C", worktree, "apply", "--cached", patch_file])
    for args in steps:
        res = git(args, env=env)
        if res.returncode != 0:  # does not apply: `apply --check` says why; nothing is written
            return out
    raw = git(["-C", worktree, "diff-index", "--cached", "--raw", "-z", "--no-renames", tree], env=env)
    out.changes, out.judged = _raw(raw.stdout), raw.returncode == 0
    return out


def _allowed(path: str, allowed: list[str]) -> bool:
    for rule in allowed:
        rule = rule.rstrip("/")
        if path == rule or path.startswith(rule + "/") or fnmatch.fnmatchcase(path, rule):
            return True
    return False


def _path_problem(path: str, verb: str, rules: PatchRules) -> str | None:
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "\\" in path:
        return f"{verb} '{path}', outside the repository"
    if any(p.startswith(".git") for p in parts) and "git_paths" not in rules.allow:
        return f"{verb} '{path}', a .git* path (fix: allow: [git_paths] if meant)"
    if rules.allowed_paths is not None and not _allowed(path, rules.allowed_paths):
        return f"{verb} '{path}', outside the allowed paths ({', '.join(rules.allowed_paths) or 'none'})"
    return None


def _mode_problems(c: Change, allow: AbstractSet[str]) -> list[str]:
    modes = {c.old_mode, c.new_mode}
    out = []
    if "120000" in modes and "symlink" not in allow:
        what = (
            "makes a symlink"
            if c.old_mode != "120000"
            else "writes through a symlink in the base tree"
            if c.new_mode == "120000"
            else "moves or deletes a symlink in the base tree"
        )
        out.append(f"{what}: '{c.path}' ({c.old_mode} => {c.new_mode}) (fix: allow: [symlink] if meant)")
    if "160000" in modes and "submodule" not in allow:
        out.append(f"adds a submodule: '{c.path}' ({c.old_mode} => {c.new_mode}) (fix: allow: [submodule] if meant)")
    if c.new_mode == "100755" and c.old_mode != "100755" and "executable" not in allow:
        out.append(
            f"makes an executable: '{c.path}' ({c.old_mode} => {c.new_mode}) (fix: allow: [executable] if meant)"
        )
    return out


def rule_problems(w: Written, rules: PatchRules) -> list[str]:
    """Why git's writes break `rules` (one line each, naming the path and the fix)."""
    if w.errors:
        return ["is not a patch git can read: " + "; ".join(w.errors)[:300]]
    if not w.paths and w.judged:
        return ["touches no file (fix: give a unified diff with ---/+++ headers)"]
    allow = set(rules.allow)
    problems: list[str] = []
    for c in w.changes:
        verb = "deletes" if c.new_mode == "000000" else "writes"
        problem = _path_problem(c.path, verb, rules)
        problems += [problem] if problem else []
        problems += _mode_problems(c, allow)
    for path in w.read_from:
        problem = _path_problem(path, "renames or copies from", rules)
        problems += [problem] if problem else []
    for path in w.binary:
        if "binary" not in allow:
            problems.append(f"writes '{path}' as a binary patch (fix: allow: [binary] if meant)")
    return list(dict.fromkeys(problems))
