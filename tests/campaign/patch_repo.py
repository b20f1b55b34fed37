"""A real git checkout of this project's node code in a tmp dir, the "user's checkout"
the patch tests run `playbooks/simnode_patch.yaml` against, and a byte-level snapshot
of it (tracked and untracked files, HEAD, index, status)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("campaign", "tools", "playbooks", "pyproject.toml", ".gitignore")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_checkout(dest: Path) -> Path:
    """`dest` as a git repository holding the project's code at one commit."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / name)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", ".")
    git(dest, "commit", "-qm", "the user's checkout")
    return dest


def snapshot(repo: Path, skip: tuple[str, ...] = (".campaign", "journal")) -> dict[str, str]:
    """Every byte of the checkout (outside .git and the campaign's own outputs), HEAD,
    the index and the status."""
    out = {}
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo)
        if p.is_file() and rel.parts[0] not in (".git", *skip) and "__pycache__" not in rel.parts:
            out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    out["HEAD"] = (repo / ".git/HEAD").read_text()
    out["index"] = hashlib.sha256((repo / ".git/index").read_bytes()).hexdigest()
    out["status"] = git(repo, "status", "--porcelain")
    return out
