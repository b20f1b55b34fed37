"""Code patches as git branches in the engine repository (gitpython).

A hypothesis patch becomes one commit on its own branch made from the current HEAD,
so the measured SHA is exact and the base can be restored.  The tree is never left
half-applied: a patch is checked before it is applied, and any failure afterwards
resets to the (verified clean) base.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import git
from pydantic import BaseModel

from campaign.domain.errors import UserError
from campaign.domain.models import Failure, FailureClass

MAX_EVIDENCE_LINES = 40
_DEFAULT_IDENTITY = {"GIT_AUTHOR_NAME": "campaign", "GIT_AUTHOR_EMAIL": "campaign@localhost",
                     "GIT_COMMITTER_NAME": "campaign", "GIT_COMMITTER_EMAIL": "campaign@localhost"}
_PATH_LINE = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) (\S+)|rename (?:from|to) (\S+))")


class PatchResult(BaseModel):
    branch: str
    sha: str
    base_sha: str
    base_ref: str  # branch name the patch was made from (or the SHA when detached)
    files: list[str]


class PatchConflict(Exception):
    """The patch cannot be applied; `failure` (class patch_conflict) holds the evidence."""

    def __init__(self, summary: str, evidence: Iterable[str]) -> None:
        self.failure = Failure(failure_class=FailureClass.patch_conflict, summary=summary,
                               evidence=list(evidence)[:MAX_EVIDENCE_LINES], phase="patch")
        super().__init__(summary)


def read_patch(patch: str | os.PathLike[str]) -> str:
    """Patch text from a path or the text itself."""
    if isinstance(patch, os.PathLike) or ("\n" not in patch and Path(patch).is_file()):
        try:
            return Path(patch).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{patch}: cannot read patch: {exc.strerror} (fix: check the path)") from exc
    return patch


def patch_paths(patch_text: str) -> list[str]:
    """Repository paths a unified diff touches (old and new names)."""
    paths: list[str] = []
    for line in patch_text.splitlines():
        m = _PATH_LINE.match(line)
        if not m:
            continue
        for raw in filter(None, m.groups()):
            if raw == "/dev/null":
                continue
            path = raw[2:] if line.startswith(("---", "+++")) and raw[:2] in ("a/", "b/") else raw
            if path not in paths:
                paths.append(path)
    return paths


class PatchManager:
    """Applies patches as branches of one repository and restores its base."""

    def __init__(self, repo_path: str | os.PathLike[str]) -> None:
        try:
            self.repo = git.Repo(repo_path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise UserError(f"{repo_path}: not a git repository (fix: point engine.repo at a git checkout)") from exc
        self.base_ref: str | None = None

    # -- queries --------------------------------------------------------------------
    def dirty_files(self) -> list[str]:
        """Tracked files with uncommitted changes (staged or not)."""
        out = self.repo.git.status("--porcelain", "--untracked-files=no")
        return [line[3:] for line in out.splitlines() if line.strip()]

    def current_ref(self) -> str:
        return self.repo.head.commit.hexsha if self.repo.head.is_detached else self.repo.active_branch.name

    def check(self, patch_text: str, allowed_paths: Iterable[str]) -> list[str]:
        """Problems with a (model-proposed) patch: paths outside `allowed_paths` globs,
        paths escaping the repository, or a patch that does not apply to HEAD."""
        globs = list(allowed_paths)
        paths = patch_paths(patch_text)
        if not paths:
            return ["patch touches no file (fix: give a unified diff with ---/+++ headers)"]
        problems = []
        for path in paths:
            parts = PurePosixPath(path).parts
            if path.startswith("/") or ".." in parts:
                problems.append(f"{path}: path escapes the repository")
            elif not any(fnmatch.fnmatchcase(path, g) for g in globs):
                problems.append(f"{path}: outside the allowed paths ({', '.join(globs) or 'none'})")
        errors = self._apply_check(patch_text)
        if errors:
            problems.append("does not apply: " + "; ".join(e for e in errors if e.startswith("error: patch")
                                                            or "does not" in e or "No such" in e)[:300])
        return problems

    # -- changes --------------------------------------------------------------------
    def apply(self, patch: str | os.PathLike[str], branch: str, message: str) -> PatchResult:
        """Commit `patch` on a new branch `branch` made from HEAD.  Re-applying the same
        branch and message on the same base (a resumed run) returns the existing commit."""
        text = read_patch(patch)
        dirty = self.dirty_files()
        if dirty:
            raise PatchConflict(f"{self.repo.working_dir}: uncommitted changes; refusing to patch",
                                [f"dirty: {f}" for f in dirty])
        base_sha = self.repo.head.commit.hexsha
        base_ref = self.current_ref()
        if branch in self.repo.heads:
            return self._reuse(branch, message, base_sha, base_ref)
        errors = self._apply_check(text)
        if errors:
            raise PatchConflict(f"patch does not apply to {base_ref} ({base_sha[:12]})", errors)

        created = False
        try:
            self.repo.git.checkout("-b", branch)
            created = True
            with _patch_file(text) as path:
                self.repo.git.apply("--index", "--whitespace=nowarn", path)
            self.repo.git.commit("-m", message, "--no-verify", env=self._identity())
        except git.GitCommandError as exc:
            self._abort(base_ref, branch if created else None)
            raise PatchConflict(f"applying the patch on {branch} failed; base {base_ref} restored",
                                str(exc.stderr or exc).splitlines()) from exc
        except BaseException:
            self._abort(base_ref, branch if created else None)
            raise
        self.base_ref = base_ref
        return self._result(branch, base_sha, base_ref)

    def restore(self, base: str | None = None) -> None:
        """Check the base out again (the one recorded by `apply`, or `base`)."""
        target = base or self.base_ref
        if target is None:
            raise UserError("patches: no base to restore (fix: pass the base branch or SHA)")
        dirty = self.dirty_files()
        if dirty:
            raise PatchConflict(f"{self.repo.working_dir}: uncommitted changes; cannot restore {target}",
                                [f"dirty: {f}" for f in dirty])
        self.repo.git.checkout(target)

    # -- internals ------------------------------------------------------------------
    def _reuse(self, branch: str, message: str, base_sha: str, base_ref: str) -> PatchResult:
        tip = self.repo.heads[branch].commit
        same_base = bool(tip.parents) and tip.parents[0].hexsha == base_sha
        if not (same_base and str(tip.message).strip() == message.strip()):
            raise PatchConflict(f"branch {branch} already exists with other content",
                                [f"{branch} -> {tip.hexsha[:12]} {str(tip.summary)[:80]}",
                                 f"expected parent {base_sha[:12]} and message {message.strip()[:80]!r}"])
        self.repo.git.checkout(branch)
        self.base_ref = base_ref
        return self._result(branch, base_sha, base_ref)

    def _result(self, branch: str, base_sha: str, base_ref: str) -> PatchResult:
        sha = self.repo.head.commit.hexsha
        files = self.repo.git.diff("--name-only", base_sha, sha).splitlines()
        return PatchResult(branch=branch, sha=sha, base_sha=base_sha, base_ref=base_ref, files=files)

    def _apply_check(self, text: str) -> list[str]:
        """`git apply --check -v` errors (with the hunk that was searched for), or []."""
        with _patch_file(text) as path:
            status, _out, err = self.repo.git.apply("--check", "-v", path, with_extended_output=True,
                                                    with_exceptions=False)
        if status == 0:
            return []
        lines = [ln.rstrip() for ln in err.splitlines()]
        return [ln for ln in lines if ln and not ln.startswith("Checking patch")] or [f"git apply exited {status}"]

    def _abort(self, base_ref: str, branch: str | None) -> None:
        """Back to the base with a clean tree (it was clean before we started)."""
        self.repo.git.reset("--hard")
        self.repo.git.checkout(base_ref)
        if branch is not None and branch in self.repo.heads:
            self.repo.git.branch("-D", branch)

    def _identity(self) -> dict[str, str]:
        reader = self.repo.config_reader()
        has_identity = reader.get_value("user", "name", "") and reader.get_value("user", "email", "")
        return {} if has_identity else dict(_DEFAULT_IDENTITY)


class _patch_file:
    """The patch text in a temporary file (git apply reads files; no shell involved)."""

    def __init__(self, text: str) -> None:
        self.text = text if text.endswith("\n") else text + "\n"

    def __enter__(self) -> str:
        fd, self.path = tempfile.mkstemp(suffix=".diff")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.text)
        return self.path

    def __exit__(self, *exc: object) -> None:
        os.unlink(self.path)
