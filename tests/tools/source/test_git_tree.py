"""The git adapter of the `SourceTree` port, on real repositories in tmp dirs: every
unsafe patch shape is refused by what git would write, commits are deterministic, and
the user's checkout is byte-for-byte unchanged."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from campaign.domain.models import FailureClass
from campaign.domain.source import PatchFailed, PatchRules
from tools.executors.local import LocalExecutor
from tools.source.git_tree import GitTree


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "engine"
    (repo / "kernels").mkdir(parents=True)
    (repo / "setup.py").write_text("root = 1\n")
    (repo / "kernels/setup.py").write_text("kern = 1\n")
    (repo / "kernels/attn.py").write_text("BLOCK = 16\nSPLIT = 1\n")
    (repo / "kernels/link").symlink_to("attn.py")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    return repo


def snapshot(repo: Path) -> dict[str, str]:
    """Every byte of the checkout (not .git internals) plus HEAD, index and status."""
    out = {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    out["HEAD"] = (repo / ".git/HEAD").read_text()
    out["index"] = hashlib.sha256((repo / ".git/index").read_bytes()).hexdigest()
    out["status"] = git(repo, "status", "--porcelain", "--ignored")
    return out


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


GOOD = """diff --git a/kernels/attn.py b/kernels/attn.py
--- a/kernels/attn.py
+++ b/kernels/attn.py
@@ -1,2 +1,2 @@
-BLOCK = 16
+BLOCK = 32
 SPLIT = 1
"""
OTHER = GOOD.replace("+BLOCK = 32", "+BLOCK = 64")  # applies alone, conflicts after GOOD

UNSAFE = {
    # `git apply` strips one component: this writes the root setup.py, not kernels/setup.py
    "strip": (
        "--- kernels/setup.py\n+++ kernels/setup.py\n@@ -1 +1 @@\n-root = 1\n+root = 2\n",
        "writes 'setup.py', outside the allowed paths",
    ),
    "symlink": (
        (
            "diff --git a/kernels/pw b/kernels/pw\nnew file mode 120000\n--- /dev/null\n+++ b/kernels/pw\n"
            "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
        ),
        "makes a symlink",
    ),
    "through-link": (
        (
            "diff --git a/kernels/link b/kernels/link\n--- a/kernels/link\n+++ b/kernels/link\n"
            "@@ -1 +1 @@\n-attn.py\n\\ No newline at end of file\n+/etc/passwd\n"
            "\\ No newline at end of file\n"
        ),
        "a symlink in the base tree",
    ),
    "executable": (
        "diff --git a/kernels/attn.py b/kernels/attn.py\nold mode 100644\nnew mode 100755\n",
        "makes an executable",
    ),
    "submodule": (
        (
            "diff --git a/kernels/sub b/kernels/sub\nnew file mode 160000\nindex 0000000..1234567\n"
            "--- /dev/null\n+++ b/kernels/sub\n@@ -0,0 +1 @@\n+Subproject commit "
            "1234567890123456789012345678901234567890\n"
        ),
        "adds a submodule",
    ),
    "git-path": (
        (
            "diff --git a/kernels/.gitattributes b/kernels/.gitattributes\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/kernels/.gitattributes\n@@ -0,0 +1 @@\n+* filter=evil\n"
        ),
        "a .git* path",
    ),
    "binary": (
        (
            "diff --git a/kernels/blob.bin b/kernels/blob.bin\nnew file mode 100644\nindex 0000000..e69de29\n"
            "GIT binary patch\nliteral 3\nKcmZ>Y%K!iX0s#O4\n\nliteral 0\nHcmV?d00001\n\n"
        ),
        "binary patch",
    ),
    # renames and copies: git's numstat names only the new side; both sides are judged
    "rename-out": (
        "diff --git a/setup.py b/kernels/moved.py\nsimilarity index 100%\nrename from setup.py\n"
        "rename to kernels/moved.py\n",
        "deletes 'setup.py', outside the allowed paths",
    ),
    "copy-in": (
        "diff --git a/setup.py b/kernels/copied.py\nsimilarity index 100%\ncopy from setup.py\n"
        "copy to kernels/copied.py\n",
        "copies from 'setup.py', outside the allowed paths",
    ),
    "rename-link": (
        "diff --git a/kernels/link b/kernels/link2\nsimilarity index 100%\nrename from kernels/link\n"
        "rename to kernels/link2\n",
        "symlink",
    ),
    "copy-exec": (
        "diff --git a/kernels/attn.py b/kernels/run.py\nold mode 100644\nnew mode 100755\n"
        "similarity index 100%\ncopy from kernels/attn.py\ncopy to kernels/run.py\n",
        "makes an executable: 'kernels/run.py'",
    ),
    "rename-exec": (
        "diff --git a/kernels/attn.py b/kernels/run.py\nold mode 100644\nnew mode 100755\n"
        "similarity index 100%\nrename from kernels/attn.py\nrename to kernels/run.py\n",
        "makes an executable: 'kernels/run.py'",
    ),
}


@pytest.fixture()
def tree(tmp_path: Path) -> GitTree:
    return GitTree(LocalExecutor(), str(make_repo(tmp_path)), str(tmp_path / "work"))


@pytest.mark.parametrize("shape", sorted(UNSAFE))
def test_every_unsafe_shape_is_refused_with_its_reason(tree: GitTree, tmp_path: Path, shape: str) -> None:
    text, reason = UNSAFE[shape]
    repo = Path(tree.repo)
    before = snapshot(repo)
    problems = tree.check(text, PatchRules(allowed_paths=["kernels/"]))
    assert problems and reason in problems[0], problems
    base = tree.resolve("HEAD")
    with pytest.raises(PatchFailed) as exc:
        tree.commit(
            base,
            [write(tmp_path, f"{shape}.diff", text)],
            f"campaign/c1/{shape}",
            PatchRules(allowed_paths=["kernels/"]),
        )
    assert exc.value.failure.failure_class == FailureClass.patch_refused
    assert reason in exc.value.failure.summary and exc.value.failure.phase == "patch"
    assert snapshot(repo) == before
    assert f"campaign/c1/{shape}" not in git(repo, "branch", "--list")
    assert git(repo, "worktree", "list").count("\n") == 1


def test_a_patch_over_the_size_limit_is_refused_with_its_size(tree: GitTree, tmp_path: Path) -> None:
    big = GOOD + "".join(f"+pad {i}\n" for i in range(200))  # the header's line count is wrong: git never reads it
    problems = tree.check(big, PatchRules(allowed_paths=["kernels/"], max_patch_bytes=1000))
    assert problems == [
        f"is {len(big)} bytes, over the limit of 1000 (fix: a smaller patch, or raise server.source.max_patch_bytes)"
    ]
    with pytest.raises(PatchFailed, match=f"is {len(big)} bytes, over the limit of 1000") as exc:
        tree.commit(
            tree.resolve("HEAD"),
            [write(tmp_path, "big.diff", big)],
            "campaign/c1/big",
            PatchRules(max_patch_bytes=1000),
        )
    assert exc.value.failure.failure_class == FailureClass.patch_refused
    assert not list(Path(tree.workdir).glob("patches/*")), "the refused patch was copied to the node"


def test_an_allowed_shape_passes_when_the_playbook_says_so(tree: GitTree) -> None:
    text, _ = UNSAFE["executable"]
    assert tree.check(text, PatchRules(allowed_paths=["kernels/"], allow=["executable"])) == []
    assert tree.check(GOOD, PatchRules(allowed_paths=["kernels/"])) == []


def test_commit_is_a_branch_with_a_deterministic_sha_and_the_checkout_is_untouched(
    tree: GitTree, tmp_path: Path
) -> None:
    repo = Path(tree.repo)
    before = snapshot(repo)
    base = tree.resolve("HEAD")
    patch = write(tmp_path, "good.diff", GOOD)
    rec = tree.commit(base, [patch], "campaign/c1/block-32", PatchRules())
    again = tree.commit(base, [patch], "campaign/c1/block-32", PatchRules())  # a resumed run
    assert rec.sha == again.sha and rec.branch == again.branch == "campaign/c1/block-32"
    assert rec.base == base and rec.files == ["kernels/attn.py"] and "1 file changed" in rec.stat
    assert rec.patch_sha256 == [hashlib.sha256(GOOD.encode()).hexdigest()] and "+BLOCK = 32" in rec.diff
    assert git(repo, "rev-parse", "campaign/c1/block-32").strip() == rec.sha
    wt = tree.checkout(rec.sha, "c1/block-32-candidate-r0")
    assert (Path(wt) / "kernels/attn.py").read_text().startswith("BLOCK = 32")
    assert snapshot(repo) == before  # never modified, never dirty, never switched
    tree.remove(wt)
    assert not Path(wt).exists() and git(repo, "worktree", "list").count("\n") == 1
    assert snapshot(repo) == before


def test_stacked_patches_that_conflict_are_their_own_failure(tree: GitTree, tmp_path: Path) -> None:
    base = tree.resolve("HEAD")
    a, b = write(tmp_path, "a.diff", GOOD), write(tmp_path, "b.diff", OTHER)
    tree.commit(base, [b], "campaign/c1/b", PatchRules())  # alone it applies
    with pytest.raises(PatchFailed) as exc:
        tree.commit(base, [a, b], "campaign/c1/stack-1", PatchRules())
    assert exc.value.failure.failure_class == FailureClass.stack_conflict
    stale = write(tmp_path, "stale.diff", GOOD.replace("-BLOCK = 16", "-BLOCK = 8"))
    with pytest.raises(PatchFailed) as exc:
        tree.commit(base, [stale], "campaign/c1/stale", PatchRules())
    assert exc.value.failure.failure_class == FailureClass.patch_conflict


def test_reap_removes_the_worktrees_a_killed_run_left(tree: GitTree) -> None:
    base = tree.resolve("HEAD")
    left = [tree.checkout(base, "c1/x-baseline-r0"), tree.checkout(base, "c2/y-baseline-r0")]
    assert tree.reap("c1") == [left[0]]
    assert not Path(left[0]).exists() and Path(left[1]).exists()


def test_an_unknown_ref_is_a_user_error_naming_the_field(tree: GitTree) -> None:
    from campaign.domain.errors import UserError

    with pytest.raises(UserError, match=r"server.source.ref: 'nope' is not a commit"):
        tree.resolve("nope")


def test_a_proposed_diff_text_is_committed_like_a_file(tree: GitTree) -> None:
    base = tree.resolve("HEAD")
    rec = tree.commit(base, [GOOD], "campaign/c1/proposed", PatchRules(allowed_paths=["kernels/"]))
    assert rec.patches == ["proposed diff"] and rec.files == ["kernels/attn.py"]
    assert rec.patch_sha256 == [hashlib.sha256(GOOD.encode()).hexdigest()]


@pytest.mark.cluster
@pytest.mark.parametrize("kind", ["ssh", "slurm"])
def test_rename_and_copy_shapes_are_refused_on_remote_nodes(tmp_path: Path, kind: str) -> None:
    """The same check where git runs through the node's executor: the loopback sshd (as
    the node's user) and the Slurm submit host."""
    from tests.tools.executors.conftest import make_slurm, make_ssh

    ex = make_ssh(tmp_path) if kind == "ssh" else make_slurm(tmp_path)
    repo = f"{ex.workdir}/engine"
    try:
        script = (
            f"mkdir -p {repo}/kernels && cd {repo} && printf 'root = 1\\n' > setup.py && "
            "printf 'BLOCK = 16\\nSPLIT = 1\\n' > kernels/attn.py && ln -s attn.py kernels/link && "
            "git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm init"
        )
        made = ex.run(["sh", "-c", script], timeout=60)
        assert made.returncode == 0, made.stderr
        tree = GitTree(ex, repo, f"{ex.workdir}/src")
        for shape in ("rename-out", "copy-in", "rename-link", "copy-exec", "rename-exec"):
            text, reason = UNSAFE[shape]
            problems = tree.check(text, PatchRules(allowed_paths=["kernels/"]))
            assert problems and reason in problems[0], (shape, problems)
        assert tree.check(GOOD, PatchRules(allowed_paths=["kernels/"])) == []
    finally:
        ex.run(["rm", "-rf", repo, f"{ex.workdir}/src"], timeout=60)
        ex.close()
