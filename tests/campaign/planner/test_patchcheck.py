"""Patch rules: allowed paths only (pure), and `git apply --check` in a real repo."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from campaign.planner.patchcheck import apply_check, patch_paths, patch_problems, path_problems
from tools.source.patches import PatchManager
from campaign.playbook.schema import PatchPolicy

GOOD = """diff --git a/python/sglang/srt/layers/allreduce.py b/python/sglang/srt/layers/allreduce.py
--- a/python/sglang/srt/layers/allreduce.py
+++ b/python/sglang/srt/layers/allreduce.py
@@ -1,2 +1,2 @@
 import torch
-CHUNK = 1
+CHUNK = 4
"""


def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "sglang"
    (repo / "python/sglang/srt/layers").mkdir(parents=True)
    (repo / "python/sglang/srt/layers/allreduce.py").write_text("import torch\nCHUNK = 1\n")
    (repo / "setup.py").write_text("x = 1\n")
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return repo


def test_patch_paths_reads_every_header() -> None:
    diff = GOOD + "diff --git a/old.py b/new.py\nrename from old.py\nrename to new.py\n--- /dev/null\n+++ b/added.py\n"
    assert patch_paths(diff) == ["python/sglang/srt/layers/allreduce.py", "old.py", "new.py", "added.py"]


def test_paths_outside_the_allowed_list_or_escaping_are_refused() -> None:
    policy = PatchPolicy(repo=".", allowed_paths=["python/sglang/srt/layers/"])
    assert path_problems(GOOD, policy) == []
    evil = GOOD.replace("python/sglang/srt/layers/allreduce.py", "setup.py")
    assert "outside knobs.patches.allowed_paths" in path_problems(evil, policy)[0]
    escape = GOOD.replace("python/sglang/srt/layers/allreduce.py", "python/sglang/srt/layers/../../../../etc/passwd")
    assert "escapes the repository" in path_problems(escape, policy)[0]
    assert "not a unified diff" in path_problems("just text", policy)[0]
    assert "not allowed" in path_problems(GOOD, None)[0]


def test_glob_allowed_paths() -> None:
    policy = PatchPolicy(repo=".", allowed_paths=["python/sglang/srt/*/allreduce.py"])
    assert path_problems(GOOD, policy) == []


def test_git_apply_check_in_a_real_repo_leaves_it_unchanged(tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    policy = PatchPolicy(repo=str(repo), allowed_paths=["python/sglang/srt/layers"])
    assert patch_problems(GOOD, policy, PatchManager) == []
    assert (repo / "python/sglang/srt/layers/allreduce.py").read_text() == "import torch\nCHUNK = 1\n"
    stale = GOOD.replace("-CHUNK = 1", "-CHUNK = 2")
    problems = patch_problems(stale, policy, PatchManager)
    assert len(problems) == 1 and problems[0].startswith("patch does not apply")


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p])
def test_apply_check_needs_a_git_repository(tmp_path: Path, make: object) -> None:
    policy = PatchPolicy(repo=str(make(tmp_path)), allowed_paths=["python"])  # type: ignore[operator]
    [problem] = apply_check(GOOD, policy, PatchManager)
    assert "is not a git repository" in problem


def test_without_a_source_adapter_a_patch_is_refused_not_waved_through(tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    policy = PatchPolicy(repo=str(repo), allowed_paths=["python/sglang/srt/layers"])
    assert patch_problems(GOOD, policy, None) == ["patch cannot be checked: no source-tree adapter is configured"]
