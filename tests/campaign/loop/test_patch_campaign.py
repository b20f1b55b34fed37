"""`playbooks/simnode_patch.yaml` end to end on a real git checkout: the patched code
runs (its start-up line is in the candidate's log, never the baseline's), every record
names the commit, a patch that breaks start-up and one that writes outside its allowed
paths are dead ends with their reasons, and the user's checkout is byte-for-byte the
same after a `kill -9` mid-experiment, after the resume, and at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.patch_repo import ROOT, git, make_checkout, snapshot

pytestmark = pytest.mark.slow
BANNER = "kernels: faster-steps patch: fused decode step"


def _cli(repo: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _worktrees(repo: Path) -> list[str]:
    return [ln[9:] for ln in git(repo, "worktree", "list", "--porcelain").splitlines() if ln.startswith("worktree ")][
        1:
    ]


def test_patch_campaign_runs_the_patched_tree_and_leaves_the_checkout_alone(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "checkout")
    db = tmp_path / "out" / "c.db"
    before = snapshot(repo)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli.main", "run", "playbooks/simnode_patch.yaml", "--db", str(db), "-q"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:  # kill -9 while the patched candidate runs from its worktree
        deadline = time.monotonic() + 240
        while not any("faster-steps-candidate" in w for w in _worktrees(repo)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any("faster-steps-candidate" in w for w in _worktrees(repo)), proc.communicate(timeout=5)
        time.sleep(1.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert snapshot(repo) == before  # the checkout is never touched, even mid-experiment
    cid = json.loads(_cli(repo, "status", "--db", str(db), "--json").stdout)[0]["id"]

    r = _cli(repo, "resume", cid, "--db", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    assert snapshot(repo) == before
    assert _worktrees(repo) == []  # removed after each launch, the killed run's one reaped

    show = json.loads(_cli(repo, "show", cid, "--db", str(db), "--json").stdout)
    exps = {e["hypothesis"]: e for e in show["experiments"] if e["status"] in ("finished", "failed")}
    base = git(repo, "rev-parse", "HEAD").strip()
    fast = exps["faster-steps"]
    assert fast["patch"]["sha"] == fast["patch_sha"] == git(repo, "rev-parse", f"campaign/{cid}/faster-steps").strip()
    assert fast["patch"]["base"] == base and fast["patch"]["files"] == ["tools/simnode/kernels.py"]
    assert fast["verdict"] in ("win", "inconclusive")  # a loaded CI machine may widen the intervals
    assert fast["metrics"]["single_stream"]["1"]["delta_pct"] > 10  # 0.8x step time: +25% in the model

    broken = exps["broken-start"]
    assert broken["verdict"] == "dead_end" and broken["failure_class"] == "exited"
    assert broken["patch"]["sha"] == git(repo, "rev-parse", f"campaign/{cid}/broken-start").strip()
    refused = exps["outside-allowed"]
    assert refused["verdict"] == "dead_end" and refused["failure_class"] == "patch_refused"
    assert "writes 'setup.py', outside the allowed paths" in refused["reason"]
    assert f"campaign/{cid}/outside-allowed" not in git(repo, "branch", "--list")

    # the patched code ran: its start-up line is in every candidate log of faster-steps, in no baseline log
    logs = list((db.parent / "nodes").rglob("*.log"))
    cand = [p for p in logs if p.name.startswith("faster-steps-candidate")]
    base_logs = [p for p in logs if "-baseline-" in p.name or p.name.startswith("baseline")]
    assert cand and all(BANNER in p.read_text() for p in cand)
    assert base_logs and not any(BANNER in p.read_text() for p in base_logs)
    broken_logs = [p for p in logs if p.name.startswith("broken-start-candidate")]
    assert broken_logs and all("ZeroDivisionError" in p.read_text() for p in broken_logs)

    journal = (repo / "journal/simnode-patch.md").read_text()
    assert fast["patch"]["sha"] in journal and f"campaign/{cid}/faster-steps" in journal
    assert "<details><summary>diff: 1 file changed</summary>" in journal and "+STEP_TIME_FACTOR = 0.8" in journal
