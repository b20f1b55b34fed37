"""Patch rules through the git adapter (what git would write), in a real repo."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from campaign.cli.wiring import local_source_tree as PatchManager
from campaign.planner.patchcheck import apply_check, patch_problems
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

    def run(*a: str) -> None:
        subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)

    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return repo


def test_paths_outside_the_allowed_list_are_refused_by_what_git_writes(tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    policy = PatchPolicy(repo=str(repo), allowed_paths=["python/sglang/srt/layers/"])
    assert patch_problems(GOOD, policy, PatchManager) == []
    evil = "--- python/setup.py\n+++ python/setup.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"  # git strips `python/`
    assert "outside the allowed paths" in patch_problems(evil, policy, PatchManager)[0]
    assert "not allowed" in patch_problems(GOOD, None)[0]


def test_glob_allowed_paths(tmp_path: Path) -> None:
    policy = PatchPolicy(repo=str(git_repo(tmp_path)), allowed_paths=["python/sglang/srt/*/allreduce.py"])
    assert patch_problems(GOOD, policy, PatchManager) == []


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
