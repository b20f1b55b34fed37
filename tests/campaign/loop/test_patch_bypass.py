"""Renames and copies end to end through `campaign run`: git's numstat names only the
new side of a rename or copy, so each of these once passed an `allowed_paths:
[tools/simnode/]` check.  Each is now a dead end (`patch_refused`) naming the path and
the fix, no branch is made and the user's checkout is byte-for-byte unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.campaign.patch_repo import ROOT, git, make_checkout, snapshot

pytestmark = pytest.mark.slow


def _rename(old: str, new: str, verb: str = "rename", mode: bool = False) -> str:
    modes = "old mode 100644\nnew mode 100755\n" if mode else ""
    return f"diff --git a/{old} b/{new}\n{modes}similarity index 100%\n{verb} from {old}\n{verb} to {new}\n"


#: hypothesis -> (patch, the reason its refusal names)
BYPASSES = {
    "rename-core-module": (_rename("campaign/domain/errors.py", "tools/simnode/errors_moved.py"),
                           "deletes 'campaign/domain/errors.py', outside the allowed paths"),
    "rename-root-file": (_rename("pyproject.toml", "tools/simnode/pyproject.toml"),
                         "deletes 'pyproject.toml', outside the allowed paths"),
    "copy-from-outside": (_rename("campaign/domain/errors.py", "tools/simnode/errs.py", "copy"),
                          "copies from 'campaign/domain/errors.py', outside the allowed paths"),
    "rename-base-symlink": (_rename("tools/simnode/etc-link", "tools/simnode/etc-link2"),
                            "moves or deletes a symlink in the base tree: 'tools/simnode/etc-link'"),
    "copy-executable": (_rename("tools/simnode/kernels.py", "tools/simnode/run.py", "copy", mode=True),
                        "makes an executable: 'tools/simnode/run.py' (000000 => 100755)"),
    "rename-executable": (_rename("tools/simnode/kernels.py", "tools/simnode/run2.py", mode=True),
                          "makes an executable: 'tools/simnode/run2.py' (000000 => 100755)"),
}


def _playbook(repo: Path, tmp_path: Path) -> Path:
    hyps = []
    for name, (patch, _) in BYPASSES.items():
        (tmp_path / f"{name}.diff").write_text(patch)
        hyps.append({"name": name, "patch": str(tmp_path / f"{name}.diff")})
    data = {
        "name": "patch-bypass",
        "journal": str(tmp_path / "journal" / "bypass.md"),
        "database": str(tmp_path / "out" / "c.db"),
        "node": {"kind": "simulated", "profile": "rtx6000bw-pcie-8x", "cuda": "12.8", "seed": 3,
                 "time_scale": 400, "noise_pct": 1.0},
        "server": {"engine": "simulated", "model": "sim-model", "startup_timeout_s": 120,
                   "source": {"repo": ".", "ref": "HEAD", "allowed_paths": ["tools/simnode/"]},
                   "command": "env PYTHONPATH={source} {python} -P -m tools.simnode --host {host} --port {port} "
                              "--profile {profile} --cuda {cuda} --seed {seed} --time-scale {time_scale} "
                              "--noise-pct {noise_pct} --model-path {model} --tp 8 {flags}"},
        "baseline": {"flags": {"cuda-graph-max-bs": 512}},
        "workloads": {"single": {"concurrency": [1], "output_tokens": 16, "requests_per_level": 2,
                                 "warmup_requests": 0}},
        "verdict": {"repeats": {"min": 1, "max": 1}, "interleave": False,
                    "correctness": {"prompts": 2, "max_tokens": 8}},
        "review": {"before_patch": False},
        "hypotheses": hyps,
    }
    path = tmp_path / "bypass.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "campaign.cli.main", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


def test_renames_and_copies_past_allowed_paths_are_refused_end_to_end(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "checkout")
    (repo / "tools/simnode/etc-link").symlink_to("/etc")
    git(repo, "add", "tools/simnode/etc-link")
    git(repo, "commit", "-qm", "a symlink in the base tree")
    before = snapshot(repo)
    db = tmp_path / "out" / "c.db"
    res = _cli(repo, "run", str(_playbook(repo, tmp_path)), "--db", str(db), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    cid = json.loads(_cli(repo, "status", "--db", str(db), "--json").stdout)[0]["id"]
    show = json.loads(_cli(repo, "show", cid, "--db", str(db), "--json").stdout)
    exps = {e["hypothesis"]: e for e in show["experiments"]}
    for name, (_patch, reason) in BYPASSES.items():
        exp = exps[name]
        assert exp["verdict"] == "dead_end" and exp["failure_class"] == "patch_refused", (name, exp)
        assert reason in exp["reason"], (name, exp["reason"])
        assert f"campaign/{cid}/{name}" not in git(repo, "branch", "--list")
    assert snapshot(repo) == before
