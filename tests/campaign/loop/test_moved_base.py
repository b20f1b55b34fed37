"""A patch that does not apply to the engine's source is a `patch_conflict` dead end,
"revisit when engine_sha changes".  The node's fingerprint carries the commit
`server.source.ref` names, so when the user moves that ref (pulls upstream, commits)
the campaign sees a new environment: the baseline is measured again on the new code
and the dead end re-opened, and this time the patch applies.  Before, `engine_sha`
was never filled on any node ("was unknown") and the dead end stayed dead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from campaign.store import Store
from tests.campaign.patch_repo import ROOT, git, make_checkout

pytestmark = pytest.mark.slow


def _cli(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_moved_source_ref_reopens_the_patch_that_did_not_apply(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "checkout")
    kernels = repo / "tools/simnode/kernels.py"
    original = kernels.read_text()
    kernels.write_text(original.replace("STEP_TIME_FACTOR = 1.0", "STEP_TIME_FACTOR = 1.00"))
    git(repo, "commit", "-qam", "an older engine: the patch's context is not there")
    old_base = git(repo, "rev-parse", "HEAD").strip()

    pb = yaml.safe_load((repo / "playbooks/simnode_patch.yaml").read_text())
    pb["hypotheses"] = [h for h in pb["hypotheses"] if h["name"] == "faster-steps"]
    pb["workloads"] = {"single_stream": pb["workloads"]["single_stream"]}
    pb["verdict"]["repeats"] = {"min": 2, "max": 2, "baseline": 2}
    pb["verdict"]["correctness"] = {"enabled": False}
    pb["review"] = {"before_patch": False, "after_consecutive_dead_ends": 1}
    (repo / "playbooks/moved.yaml").write_text(yaml.safe_dump(pb, sort_keys=False))
    db = tmp_path / "out" / "c.db"

    first = _cli(repo, "run", "playbooks/moved.yaml", "--db", str(db), "-q")
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-2000:]  # the review gate
    cid = json.loads(_cli(repo, "status", "--db", str(db), "--json").stdout)[0]["id"]

    kernels.write_text(original)
    git(repo, "commit", "-qam", "upstream: the context the patch was written against")
    new_base = git(repo, "rev-parse", "HEAD").strip()
    second = _cli(repo, "resume", cid, "--db", str(db), "--approve", "-q")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]

    show = json.loads(_cli(repo, "show", cid, "--db", str(db), "--json").stdout)
    tries = [e for e in show["experiments"] if e["hypothesis"] == "faster-steps"]
    assert [e["failure_class"] for e in tries] == ["patch_conflict", None]
    assert tries[1]["patch"]["base"] == new_base
    baselines = Store(db).list_experiments(cid, role="baseline")  # measured again on the new code
    assert len(baselines) == 2
    assert f"engine_sha {old_base} -> {new_base}" in baselines[1].reason
