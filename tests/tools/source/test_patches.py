"""PatchManager on a real git repository in tmp_path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import FailureClass
from tools.source.patches import PatchConflict, PatchManager, patch_paths

WORKER = "def verify(batch):\n    out = []\n    for req in batch:\n        out.append(req)\n    return out\n"

GOOD = """\
diff --git a/python/sglang/srt/speculative/eagle_worker.py b/python/sglang/srt/speculative/eagle_worker.py
--- a/python/sglang/srt/speculative/eagle_worker.py
+++ b/python/sglang/srt/speculative/eagle_worker.py
@@ -1,5 +1,7 @@
 def verify(batch):
+    if not batch:
+        return []
     out = []
     for req in batch:
         out.append(req)
     return out
"""

CONFLICTING = """\
diff --git a/python/sglang/srt/speculative/eagle_worker.py b/python/sglang/srt/speculative/eagle_worker.py
--- a/python/sglang/srt/speculative/eagle_worker.py
+++ b/python/sglang/srt/speculative/eagle_worker.py
@@ -1,5 +1,5 @@
 def verify(batch):
-    out = {}
+    out = set()
     for req in batch:
         out.append(req)
     return out
"""

NEW_FILE = """\
diff --git a/python/sglang/srt/spec_toggle.py b/python/sglang/srt/spec_toggle.py
new file mode 100644
--- /dev/null
+++ b/python/sglang/srt/spec_toggle.py
@@ -0,0 +1 @@
+ENABLED = True
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "sglang"
    (root / "python/sglang/srt/speculative").mkdir(parents=True)
    (root / "python/sglang/srt/speculative/eagle_worker.py").write_text(WORKER)
    (root / "README.md").write_text("engine\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "-c", "user.name=dev", "-c", "user.email=dev@x", "commit", "-qm", "base")
    return root


def test_apply_commits_on_a_new_branch_and_restore_returns_to_base(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    pm = PatchManager(repo)
    result = pm.apply(GOOD, "hyp/empty-batch", "hypothesis: empty batch fast path")
    assert (result.branch, result.base_sha, result.base_ref) == ("hyp/empty-batch", base, "main")
    assert result.files == ["python/sglang/srt/speculative/eagle_worker.py"]
    assert git(repo, "rev-parse", "HEAD") == result.sha != base
    assert git(repo, "rev-parse", "HEAD~1") == base
    assert "if not batch" in (repo / "python/sglang/srt/speculative/eagle_worker.py").read_text()
    assert git(repo, "status", "--porcelain") == ""

    pm.restore()
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "python/sglang/srt/speculative/eagle_worker.py").read_text() == WORKER


def test_apply_from_a_file_with_a_new_file(repo: Path, tmp_path: Path) -> None:
    patch = tmp_path / "toggle.diff"
    patch.write_text(NEW_FILE)
    result = PatchManager(repo).apply(str(patch), "hyp/toggle", "add toggle")
    assert result.files == ["python/sglang/srt/spec_toggle.py"]
    assert (repo / "python/sglang/srt/spec_toggle.py").read_text() == "ENABLED = True\n"


def test_reapplying_the_same_hypothesis_reuses_its_commit(repo: Path) -> None:
    pm = PatchManager(repo)
    first = pm.apply(GOOD, "hyp/a", "same message")
    pm.restore()
    again = PatchManager(repo).apply(GOOD, "hyp/a", "same message")
    assert again.sha == first.sha
    PatchManager(repo).restore("main")
    with pytest.raises(PatchConflict, match="already exists"):
        PatchManager(repo).apply(GOOD, "hyp/a", "another message")


def test_conflicting_patch_reports_the_rejected_hunk_and_leaves_no_trace(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    with pytest.raises(PatchConflict) as info:
        PatchManager(repo).apply(CONFLICTING, "hyp/bad", "bad")
    failure = info.value.failure
    assert failure.failure_class == FailureClass.patch_conflict and failure.phase == "patch"
    assert "    out = {}" in failure.evidence  # the hunk line git searched for
    assert any("patch does not apply" in ln for ln in failure.evidence)
    assert git(repo, "rev-parse", "HEAD") == base
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert "hyp/bad" not in git(repo, "branch")


def test_dirty_repo_is_refused_and_left_as_it_was(repo: Path) -> None:
    (repo / "README.md").write_text("local edit\n")
    with pytest.raises(PatchConflict) as info:
        PatchManager(repo).apply(GOOD, "hyp/x", "x")
    assert info.value.failure.evidence == ["dirty: README.md"]
    assert (repo / "README.md").read_text() == "local edit\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_failure_after_branching_resets_to_a_clean_base(repo: Path) -> None:
    """The commit fails after the patch was staged: nothing half-applied remains."""
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.program", "false")  # signing fails: the commit step raises
    with pytest.raises(PatchConflict, match="base main restored"):
        PatchManager(repo).apply(GOOD, "hyp/unsignable", "x")
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert "hyp/unsignable" not in git(repo, "branch")
    assert (repo / "python/sglang/srt/speculative/eagle_worker.py").read_text() == WORKER


def test_check_for_model_proposed_patches(repo: Path) -> None:
    pm = PatchManager(repo)
    allowed = ["python/sglang/srt/speculative/*"]
    assert pm.check(GOOD, allowed) == []
    problems = pm.check(NEW_FILE, allowed)
    assert problems == ["python/sglang/srt/spec_toggle.py: outside the allowed paths (python/sglang/srt/speculative/*)"]
    assert any(p.startswith("does not apply") for p in pm.check(CONFLICTING, allowed))
    escaping = GOOD.replace("a/python/sglang/srt/speculative/eagle_worker.py", "a/../etc/passwd")
    assert any("escapes the repository" in p for p in pm.check(escaping, ["**"]))
    assert pm.check("just some prose", allowed) == ["patch touches no file (fix: give a unified diff with ---/+++ headers)"]


def test_patch_paths_reads_headers() -> None:
    assert patch_paths(NEW_FILE) == ["python/sglang/srt/spec_toggle.py"]
    assert patch_paths(GOOD) == ["python/sglang/srt/speculative/eagle_worker.py"]


def test_not_a_repo_and_nothing_to_restore(tmp_path: Path, repo: Path) -> None:
    with pytest.raises(UserError, match="not a git repository"):
        PatchManager(tmp_path / "nowhere")
    with pytest.raises(UserError, match="no base to restore"):
        PatchManager(repo).restore()
