"""The engine's source tree as the core records it: where a launch ran from.

A patched launch runs from a commit on its own branch (`campaign/<campaign>/<hypothesis>`);
the record keeps that commit, the base it was made from, what the diff touched and the
sha256 of every patch file, so a verdict names exactly the code that was measured.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, Field

from campaign.domain.models import Failure, FailureClass

__all__ = ["PatchFailed", "PatchRecord", "PatchRules", "Unsafe", "normalized_patch_sha", "patch_file_sha", "patch_text"]

#: patch shapes refused unless the playbook allows them by name.
Unsafe = Literal["symlink", "executable", "submodule", "git_paths", "binary"]


class PatchRules(BaseModel):
    """What a patch may write: `allowed_paths` (a path, a directory or a glob; None:
    anywhere in the repository) and the unsafe shapes the playbook allows."""

    allowed_paths: list[str] | None = None
    allow: list[Unsafe] = Field(default_factory=list)
    max_patch_bytes: int = Field(default=1_000_000, gt=0)  # a bigger patch is refused before git reads it


class PatchRecord(BaseModel):
    """The tree one launch ran from."""

    sha: str  # the commit the server ran from (== base for an unpatched launch)
    base: str  # the commit of `server.source.ref` it was made from
    branch: str | None = None  # campaign/<campaign>/<hypothesis>; None: unpatched
    files: list[str] = Field(default_factory=list)
    stat: str = ""  # `git diff --stat base sha`
    patch_sha256: list[str] = Field(default_factory=list)  # one per patch file, in apply order
    patches: list[str] = Field(default_factory=list)  # the patch files, in apply order
    content: list[str] = Field(default_factory=list)  # `normalized_patch_sha` of each: duplicates by content
    diff: str = ""  # `git diff base sha`, redacted and truncated


class PatchFailed(Exception):
    """A patch could not be made into a commit: refused by the safety rules, does not
    apply, or two stacked patches conflict.  `failure` is the classified evidence."""

    def __init__(self, failure_class: FailureClass, summary: str, evidence: list[str] | None = None) -> None:
        self.failure = Failure(
            failure_class=failure_class, summary=summary, evidence=(evidence or [])[:40], phase="patch"
        )
        super().__init__(summary)


def patch_text(patch: str) -> str:
    """A patch's text from its file path (a playbook's `patch:`), or the text itself."""
    from pathlib import Path

    if "\n" not in patch:
        try:
            return Path(patch).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return patch
    return patch


def patch_file_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _side(path: str) -> str:
    path = path.split("\t", 1)[0].strip().strip('"')
    return path[2:] if path.startswith(("a/", "b/")) else path


def normalized_patch_sha(diff: str) -> str:
    """Identity of a diff's content: file names (without a/ b/), and the hunks' lines
    without line numbers, `index` lines, trailing blanks or CRs.  Two patches with the
    same normalized text are the same idea whatever they are called."""
    out: list[str] = []
    in_hunk = False
    for raw in diff.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if line.startswith(("diff --git ", "index ")):
            in_hunk = False
            continue
        if line.startswith(("--- ", "+++ ")) and not in_hunk:
            out.append(line[:4] + _side(line[4:]))
            continue
        if _HUNK.match(line):
            in_hunk = True
            out.append("@@")
            continue
        if in_hunk and line[:1] in ("+", "-", " ", "\\"):
            out.append(line)
        elif line:
            in_hunk = False
            out.append(line)
    return hashlib.sha256("\n".join(out).encode()).hexdigest()
