"""The `SourceTree` port over git on a node (local, ssh or Slurm: git runs through the
node's executor, patch files are copied to the node first).

The user's checkout is only ever read: every launch gets its own `git worktree`
under `<workdir>/worktrees/<campaign>/`, patches are applied and committed inside a
worktree, and the commit is kept as the branch `campaign/<campaign>/<hypothesis>`.
Commits take the base commit's date and a fixed identity, so the same base and the
same patches give the same SHA on every attempt (a resumed run reuses its branch).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import secrets
import tempfile
from pathlib import Path

from campaign.domain.errors import UserError
from campaign.domain.models import CommandResult, FailureClass
from campaign.domain.redact import redact_text
from campaign.domain.source import (
    PatchFailed,
    PatchRecord,
    PatchRules,
    normalized_patch_sha,
    patch_file_sha,
    patch_text,
)
from tools.executors.base import Executor
from tools.source.safety import inspect_patch, rule_problems

__all__ = ["GitTree"]

_IDENTITY = {
    "GIT_AUTHOR_NAME": "campaign",
    "GIT_AUTHOR_EMAIL": "campaign@localhost",
    "GIT_COMMITTER_NAME": "campaign",
    "GIT_COMMITTER_EMAIL": "campaign@localhost",
}
_SAFE = re.compile(r"[^A-Za-z0-9._/-]+")
MAX_DIFF_CHARS = 20000


class GitTree:
    """One repository (`repo`, a path on the node) and a scratch dir for its worktrees."""

    def __init__(self, executor: Executor, repo: str, workdir: str) -> None:
        self.executor = executor
        self._repo, self._workdir = repo, workdir.rstrip("/")
        self._cwd: str | None = None

    def _abs(self, path: str) -> str:
        """Paths on the node, absolute (`git -C` would read a relative one from the repo)."""
        if posixpath.isabs(path):
            return path
        if self._cwd is None:
            self._cwd = self.executor.run(["pwd"], timeout=60).stdout.strip() or "/"
        return posixpath.normpath(posixpath.join(self._cwd, path))

    @property
    def repo(self) -> str:
        return self._abs(self._repo)

    @property
    def workdir(self) -> str:
        return self._abs(self._workdir)

    # -- plumbing ---------------------------------------------------------------------
    def git(self, args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> CommandResult:
        return self.executor.run(["git", *args], timeout=timeout, env={"GIT_TERMINAL_PROMPT": "0", **(env or {})})

    def _ok(self, args: list[str], what: str, *, env: dict[str, str] | None = None) -> str:
        res = self.git(args, env=env)
        if res.returncode != 0:
            raise RuntimeError(f"git {what} failed in {self.repo}: {redact_text(res.stderr.strip())[-400:]}")
        return res.stdout

    def _put_patch(self, patch: str, rules: PatchRules) -> tuple[str, str]:
        """Copy a patch to the node: (node path, sha256 of its bytes).  `patch` is a
        file (a playbook's) or the diff itself (a planner's proposal).  One over
        `rules.max_patch_bytes` is refused before it is copied or read by git."""
        if "\n" in patch:
            data = (patch if patch.endswith("\n") else patch + "\n").encode()
        else:
            try:
                data = Path(patch).read_bytes()
            except OSError as exc:
                raise UserError(f"{patch}: cannot read the patch: {exc.strerror} (fix: check the path)") from None
        if len(data) > rules.max_patch_bytes:
            summary = (
                f"patch {_name(patch)} is {len(data)} bytes, over the limit of {rules.max_patch_bytes} "
                "(fix: a smaller patch, or raise server.source.max_patch_bytes)"
            )
            raise PatchFailed(FailureClass.patch_refused, summary, [summary])
        digest = patch_file_sha(data)
        remote = f"{self.workdir}/patches/{digest}.diff"
        self.executor.run(["mkdir", "-p", f"{self.workdir}/patches"], timeout=60)
        with tempfile.NamedTemporaryFile("wb", suffix=".diff", delete=False) as f:
            f.write(data)
        try:
            self.executor.put(f.name, remote)
        finally:
            os.unlink(f.name)
        return remote, digest

    # -- the port ---------------------------------------------------------------------
    def resolve(self, ref: str) -> str:
        res = self.git(["-C", self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        if res.returncode != 0 or not res.stdout.strip():
            raise UserError(
                f"server.source.ref: '{ref}' is not a commit of {self.repo} "
                "(fix: give a branch, tag or SHA of that repository)"
            )
        return res.stdout.strip()

    def checkout(self, sha: str, name: str) -> str:
        path = f"{self.workdir}/worktrees/{_SAFE.sub('-', name)}"
        self.remove(path)  # a leftover of a killed attempt
        self.executor.run(["mkdir", "-p", posixpath.dirname(path)], timeout=60)
        self._ok(["-C", self.repo, "worktree", "add", "--detach", "--force", path, sha], "worktree add")
        return path

    def remove(self, path: str) -> None:
        self.git(["-C", self.repo, "worktree", "remove", "--force", "--force", path])
        self.executor.run(["rm", "-rf", path], timeout=120)
        self.git(["-C", self.repo, "worktree", "prune"])

    def reap(self, scope: str) -> list[str]:
        prefix = f"{self.workdir}/worktrees/{_SAFE.sub('-', scope)}/"
        listing = self.git(["-C", self.repo, "worktree", "list", "--porcelain"]).stdout
        found = [ln[len("worktree ") :] for ln in listing.splitlines() if ln.startswith("worktree ")]
        gone = [p for p in found if p.startswith(prefix)]
        for path in gone:
            self.remove(path)
        self.git(["-C", self.repo, "worktree", "prune"])
        return gone

    def check(self, patch_text: str, rules: PatchRules) -> list[str]:
        """Judge a proposed patch against the base `HEAD`, in a throwaway worktree."""
        try:
            remote, digest = self._put_patch(patch_text if "\n" in patch_text else patch_text + "\n", rules)
        except PatchFailed as exc:
            return [exc.failure.summary.removeprefix("patch proposed diff ")]
        base = self.resolve("HEAD")
        wt = self.checkout(base, f"check/{digest[:16]}")
        try:
            return self._problems(wt, remote, rules)
        finally:
            self.remove(wt)

    def commit(self, base: str, patches: list[str], branch: str, rules: PatchRules) -> PatchRecord:
        copied = [self._put_patch(p, rules) for p in patches]
        wt = self.checkout(base, "commit/" + hashlib.sha256(branch.encode()).hexdigest()[:16])
        try:
            for i, (local, (remote, _d)) in enumerate(zip(patches, copied)):
                problems = self._problems(wt, remote, rules, applied=i)
                if problems:
                    cls = (
                        FailureClass.patch_refused
                        if not problems[0].startswith("does not apply")
                        else (FailureClass.stack_conflict if i > 0 else FailureClass.patch_conflict)
                    )
                    what = f"patch {_name(local)}" + (f" (after {', '.join(map(_name, patches[:i]))})" if i else "")
                    raise PatchFailed(cls, f"{what} {problems[0]}", [redact_text(p) for p in problems])
                self._ok(["-C", wt, "apply", "--index", "--whitespace=nowarn", remote], "apply")
            date = self._ok(["-C", self.repo, "show", "-s", "--format=%cI", base], "show").strip()
            env = {**_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
            message = f"{branch}\n\n" + "\n".join(f"patch {_name(p)} sha256 {d}" for p, (_r, d) in zip(patches, copied))
            self._ok(
                ["-C", wt, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "--allow-empty", "-m", message],
                "commit",
                env=env,
            )
            sha = self._ok(["-C", wt, "rev-parse", "HEAD"], "rev-parse").strip()
        finally:
            self.remove(wt)
        return PatchRecord(
            sha=sha,
            base=base,
            branch=self._keep_branch(branch, sha),
            patch_sha256=[d for _r, d in copied],
            patches=[_name(p) for p in patches],
            content=[normalized_patch_sha(patch_text(p)) for p in patches],
            **self._describe(base, sha),
        )

    # -- internals --------------------------------------------------------------------
    def _problems(self, wt: str, remote: str, rules: PatchRules, applied: int = 0) -> list[str]:
        scratch = f"{remote}.{secrets.token_hex(6)}.index"  # two checks of one patch may overlap
        try:
            written = inspect_patch(self.git, wt, remote, scratch)
        finally:
            self.executor.run(["rm", "-f", scratch], timeout=60)
        problems = rule_problems(written, rules)
        if problems:
            return problems
        res = self.git(["-C", wt, "apply", "--check", "-v", remote])
        if res.returncode != 0:
            lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("Checking patch")]
            where = "the patches before it" if applied else "the base"
            return [f"does not apply to {where}: " + "; ".join(lines)[:300]]
        if not written.judged:  # fail closed: what git would write is unknown
            return ["could not be judged: git applies it to the worktree but not to a scratch index"]
        return []

    def _keep_branch(self, branch: str, sha: str) -> str:
        """The branch is the record: never moved.  Another commit under the same name
        (the base moved) is kept as `<branch>-<sha12>`."""
        for name in (branch, f"{branch}-{sha[:12]}"):
            have = self.git(["-C", self.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"])
            if have.returncode == 0:
                if have.stdout.strip() == sha:
                    return name
                continue
            self._ok(["-C", self.repo, "branch", name, sha], "branch")
            return name
        raise RuntimeError(f"git branch: {branch} and its SHA-suffixed name both hold other commits")

    def _describe(self, base: str, sha: str) -> dict[str, object]:
        files = self._ok(["-C", self.repo, "diff", "--name-only", base, sha], "diff").split("\n")
        stat = self._ok(["-C", self.repo, "diff", "--stat", base, sha], "diff --stat").rstrip()
        diff = self._ok(["-C", self.repo, "diff", base, sha], "diff")
        if len(diff) > MAX_DIFF_CHARS:
            diff = diff[:MAX_DIFF_CHARS] + f"\n... ({len(diff) - MAX_DIFF_CHARS} more characters)\n"
        return {"files": [f for f in files if f], "stat": stat, "diff": redact_text(diff)}


def _name(patch: str) -> str:
    """How a patch is named in records: its file, or `proposed diff` for a diff's text."""
    return "proposed diff" if "\n" in patch else patch
