"""Renames and copies end to end through `campaign run`: git's numstat names only the
new side of a rename or copy, so each of these once passed an `allowed_paths:
[tools/simnode/]` check.  Each is now a dead end (`patch_refused`) naming the path and
the fix, no branch is made and the user's checkout is byte-for-byte unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.campaign.patch_repo import git, make_checkout, snapshot
from tests.campaign.sim_playbook import SIM_COMMAND, campaign_cli, tiny_playbook, write_playbook

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
    data = tiny_playbook(tmp_path, "patch-bypass", hyps, database=str(tmp_path / "out" / "c.db"),
                         review={"before_patch": False})
    data["server"]["source"] = {"repo": ".", "ref": "HEAD", "allowed_paths": ["tools/simnode/"]}
    data["server"]["command"] = "env PYTHONPATH={source} {python} -P " + SIM_COMMAND.removeprefix("{python} ")
    return write_playbook(tmp_path / "bypass.yaml", data)


def test_renames_and_copies_past_allowed_paths_are_refused_end_to_end(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "checkout")
    (repo / "tools/simnode/etc-link").symlink_to("/etc")
    git(repo, "add", "tools/simnode/etc-link")
    git(repo, "commit", "-qm", "a symlink in the base tree")
    before = snapshot(repo)
    db = tmp_path / "out" / "c.db"
    res = campaign_cli(repo, "run", str(_playbook(repo, tmp_path)), "--db", str(db), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    cid = json.loads(campaign_cli(repo, "status", "--db", str(db), "--json").stdout)[0]["id"]
    show = json.loads(campaign_cli(repo, "show", cid, "--db", str(db), "--json").stdout)
    exps = {e["hypothesis"]: e for e in show["experiments"]}
    for name, (_patch, reason) in BYPASSES.items():
        exp = exps[name]
        assert exp["verdict"] == "dead_end" and exp["failure_class"] == "patch_refused", (name, exp)
        assert reason in exp["reason"], (name, exp["reason"])
        assert f"campaign/{cid}/{name}" not in git(repo, "branch", "--list")
    assert snapshot(repo) == before
