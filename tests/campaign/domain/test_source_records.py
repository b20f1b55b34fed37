"""Patch identity by content, and the journal's patch section (escaped, collapsed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.records import ExperimentView
from campaign.domain.source import PatchRecord, normalized_patch_sha
from campaign.journal.experiment_section import patch_details, patch_line
from campaign.playbook.load import load_playbook

A = """diff --git a/kernels/attn.py b/kernels/attn.py
index 1111111..2222222 100644
--- a/kernels/attn.py
+++ b/kernels/attn.py
@@ -1,2 +1,2 @@
-BLOCK = 16
+BLOCK = 32
 SPLIT = 1
"""
# the same change: no a/ b/ prefixes, no index line, other line numbers, trailing blanks, CRLF
B = "--- kernels/attn.py\r\n+++ kernels/attn.py  \r\n@@ -7,2 +7,2 @@\r\n-BLOCK = 16\r\n+BLOCK = 32\r\n SPLIT = 1\r\n"


def test_identical_changes_have_one_identity_whatever_their_form() -> None:
    assert normalized_patch_sha(A) == normalized_patch_sha(B)
    assert normalized_patch_sha(A) != normalized_patch_sha(A.replace("+BLOCK = 32", "+BLOCK = 64"))
    assert normalized_patch_sha(A) != normalized_patch_sha(A.replace("kernels/attn.py", "kernels/mlp.py"))


def test_a_playbook_with_the_same_diff_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.diff").write_text(A)
    (tmp_path / "b.diff").write_text(B)
    (tmp_path / "pb.yaml").write_text(
        "name: t\nserver:\n  command: 'env PYTHONPATH={source} {python} -m x {flags}'\n  source: {repo: .}\n"
        "workloads:\n  s: {concurrency: [1]}\nhypotheses:\n  - name: one\n    patch: a.diff\n"
        "  - name: two\n    patch: b.diff\n"
    )
    with pytest.raises(UserError) as exc:
        load_playbook(tmp_path / "pb.yaml")
    want = (
        f"{tmp_path / 'pb.yaml'}:11: hypotheses.two.patch: the same diff as hypothesis 'one' (fix: remove one of them)"
    )
    assert exc.value.lines == [want]


def test_the_journal_shows_the_commit_and_the_escaped_diff_collapsed() -> None:
    hostile = A.replace("+BLOCK = 32", "+BLOCK = 32  # ``` </details> <script>x</script>")
    rec = PatchRecord(
        sha="c" * 40,
        base="b" * 40,
        branch="campaign/c1/h",
        files=["kernels/attn.py"],
        stat=" kernels/attn.py | 2 +-",
        patch_sha256=["d" * 64],
        patches=["p/h.diff"],
        diff=hostile,
    )
    exp = ExperimentView(id="e", hypothesis="h", patch_sha=rec.sha, patch=rec)
    line = str(patch_line(exp))
    assert "c" * 40 in line and "campaign/c1/h" in line and "b" * 40 in line and "h.diff" in line
    details = str(patch_details(exp))
    assert details.startswith("<details><summary>diff: 1 file changed</summary>") and details.endswith("</details>")
    body = details[len("<details><summary>diff: 1 file changed</summary>") : -len("</details>")]
    fence = body.strip().split("\n", 1)[0]
    assert fence == "````diff" and body.strip().endswith("\n````")  # longer than any ``` inside
    assert str(
        patch_line(ExperimentView(id="e", hypothesis="h", patch=PatchRecord(sha="a" * 40, base="a" * 40)))
    ).startswith("unpatched")
