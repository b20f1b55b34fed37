"""The `SourceTree` git adapter over every executor kind (local, ssh, Slurm): the
repository lives on the node, the patch is copied there and git runs there; the node's
checkout is unchanged, the commit kept as a branch, the worktree removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.models import FailureClass
from campaign.domain.source import PatchFailed, PatchRules
from tools.executors.base import Executor
from tools.source.git_tree import GitTree

GOOD = """diff --git a/kernels/attn.py b/kernels/attn.py
--- a/kernels/attn.py
+++ b/kernels/attn.py
@@ -1,2 +1,2 @@
-BLOCK = 16
+BLOCK = 32
 SPLIT = 1
"""
STRIPPED = "--- kernels/setup.py\n+++ kernels/setup.py\n@@ -1 +1 @@\n-root = 1\n+root = 2\n"
MAKE_REPO = (
    "mkdir -p repo/kernels && cd repo && printf 'BLOCK = 16\\nSPLIT = 1\\n' > kernels/attn.py && "
    "printf 'root = 1\\n' > setup.py && printf 'kern = 1\\n' > kernels/setup.py && git init -q && "
    "git add . && git -c user.name=n -c user.email=n@n commit -qm init"
)
STATE = "cd repo && git rev-parse HEAD && git status --porcelain --ignored && cat kernels/attn.py setup.py | sha256sum"


def _sh(executor: Executor, node_dir: str, script: str) -> str:
    res = executor.run(["sh", "-c", f"cd {node_dir} && {script}"], timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_patch_commit_on_the_node(executor: Executor, node_dir: str, tmp_path: Path) -> None:
    _sh(executor, node_dir, MAKE_REPO)
    before = _sh(executor, node_dir, STATE)
    tree = GitTree(executor, f"{node_dir}/repo", f"{node_dir}/work")
    rules = PatchRules(allowed_paths=["kernels/"])
    assert tree.check(GOOD, rules) == []
    assert "writes 'setup.py', outside the allowed paths" in tree.check(STRIPPED, rules)[0]

    base = tree.resolve("HEAD")
    patch = tmp_path / "good.diff"
    patch.write_text(GOOD)
    rec = tree.commit(base, [str(patch)], "campaign/c1/block-32", rules)
    assert rec.base == base and rec.files == ["kernels/attn.py"]
    assert _sh(executor, node_dir, "git -C repo rev-parse campaign/c1/block-32").strip() == rec.sha
    wt = tree.checkout(rec.sha, "c1/block-32-candidate-r0")
    assert _sh(executor, node_dir, f"cat {wt}/kernels/attn.py").startswith("BLOCK = 32")
    tree.remove(wt)
    assert executor.run(["test", "-e", wt], timeout=30).returncode != 0
    assert _sh(executor, node_dir, STATE) == before

    stripped = tmp_path / "stripped.diff"
    stripped.write_text(STRIPPED)
    with pytest.raises(PatchFailed) as exc:
        tree.commit(base, [str(stripped)], "campaign/c1/stripped", rules)
    assert exc.value.failure.failure_class == FailureClass.patch_refused
    left = tree.checkout(base, "c1/left-baseline-r0")  # what a kill -9 leaves
    assert tree.reap("c1") == [left]
    assert _sh(executor, node_dir, "git -C repo worktree list | wc -l").strip() == "1"
    assert _sh(executor, node_dir, STATE) == before
