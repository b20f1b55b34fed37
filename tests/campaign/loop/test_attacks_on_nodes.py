"""The issue-46 attacks end to end through `campaign run`, on the local (simulated), ssh
and Slurm nodes: one small campaign per node kind holds them all.

- Renames and copies past `allowed_paths: [tools/simnode/]` (git's numstat names only
  the new side of a rename or copy, so each once passed): each is a dead end
  (`patch_refused`) naming the path, no branch is made, the node's checkout is unchanged.
- Secret values under plain names (`MY_PAT: ${GITHUB_PAT}`, `DB_DSN: ${PGPASS_URL}`, and
  `MY_SALT: ${PLAIN_VALUE}`, a value of no token shape) that the server echoes into its log: masked by value in every record (the database,
  its compressed columns, the journal and its index), on the terminal, and in every
  file the campaign left on the node but the server's own log.
"""

from __future__ import annotations

import json
import secrets
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.campaign.leaks import files_holding, packed_values
from tests.campaign.patch_repo import git, make_checkout
from tests.campaign.remote_node import node_section, on_node
from tests.campaign.sim_playbook import SIM_COMMAND, campaign_cli, tiny_playbook, write_playbook

pytestmark = pytest.mark.slow
SIM = {"profile": "rtx6000bw-pcie-8x", "cuda": "12.8", "seed": 1, "time_scale": 400, "noise_pct": 1.0}


def _rename(old: str, new: str, verb: str = "rename", mode: bool = False) -> str:
    modes = "old mode 100644\nnew mode 100755\n" if mode else ""
    return f"diff --git a/{old} b/{new}\n{modes}similarity index 100%\n{verb} from {old}\n{verb} to {new}\n"


#: hypothesis -> (patch, the reason its refusal names)
BYPASSES = {
    "rename-core-module": (
        _rename("campaign/domain/errors.py", "tools/simnode/errors_moved.py"),
        "deletes 'campaign/domain/errors.py', outside the allowed paths",
    ),
    "rename-root-file": (
        _rename("pyproject.toml", "tools/simnode/pyproject.toml"),
        "deletes 'pyproject.toml', outside the allowed paths",
    ),
    "copy-from-outside": (
        _rename("campaign/domain/errors.py", "tools/simnode/errs.py", "copy"),
        "copies from 'campaign/domain/errors.py', outside the allowed paths",
    ),
    "rename-base-symlink": (
        _rename("tools/simnode/etc-link", "tools/simnode/etc-link2"),
        "moves or deletes a symlink in the base tree: 'tools/simnode/etc-link'",
    ),
    "copy-executable": (
        _rename("tools/simnode/kernels.py", "tools/simnode/run.py", "copy", mode=True),
        "makes an executable: 'tools/simnode/run.py' (000000 => 100755)",
    ),
    "rename-executable": (
        _rename("tools/simnode/kernels.py", "tools/simnode/run2.py", mode=True),
        "makes an executable: 'tools/simnode/run2.py' (000000 => 100755)",
    ),
}

#: the simulated server, printing the values it was given first (to stdout and stderr)
ECHO_SERVER = """import os, runpy, sys
line = " ".join(f"{k.lower()}=" + os.environ.get(k, "") for k in ("MY_PAT", "DB_DSN", "MY_SALT"))
print(line, flush=True)
print(line, file=sys.stderr, flush=True)
sys.argv[0] = "simnode"
runpy.run_module("tools.simnode", run_name="__main__")
"""

#: the checkout as git sees it: HEAD, branches, worktrees, the index, and (status) every
#: file that differs from it or is new
STATE = (
    "cd {r} && git rev-parse HEAD && git branch --list && git worktree list | wc -l && "
    "git ls-files -s && git status --porcelain --untracked-files=all"
)


def _checkout(kind: str, tmp_path: Path, workdir: str | None) -> str:
    """The user's checkout on the node, with a symlink to /etc and the echoing wrapper in
    its base tree: made here, then (ssh) unpacked on the node as the node's user."""
    local = make_checkout(tmp_path / "checkout")
    (local / "tools/simnode/etc-link").symlink_to("/etc")
    (local / "tools/simnode/echo_env.py").write_text(ECHO_SERVER)
    git(local, "add", "tools/simnode/etc-link", "tools/simnode/echo_env.py")
    git(local, "commit", "-qm", "a symlink and an echoing wrapper in the base tree")
    if kind != "ssh":
        return str(local)
    repo = f"{workdir}-repo"
    tar = subprocess.run(["tar", "-C", str(local), "-cf", "-", "."], capture_output=True, check=True).stdout
    on_node(kind, f"mkdir -p {shlex.quote(repo)} && tar -C {shlex.quote(repo)} -xf -", stdin=tar)
    return repo


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("local"),
        pytest.param("ssh", marks=pytest.mark.cluster),
        pytest.param("slurm", marks=pytest.mark.cluster),
    ],
)
def test_hostile_patches_and_secret_values_on_every_node_kind(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node, workdir = node_section(kind, SIM, tmp_path, "attacks")
    repo = _checkout(kind, tmp_path, workdir)
    try:
        _campaign(kind, tmp_path, node, workdir, repo, monkeypatch)
    finally:
        if kind == "ssh":
            on_node(kind, f"rm -rf {shlex.quote(str(workdir))} {shlex.quote(repo)}")


def _campaign(
    kind: str, tmp_path: Path, node: dict, workdir: str | None, repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "GITHUB_PAT": "github_pat_" + secrets.token_hex(20),
        "PGPASS_URL": f"postgres://app:{secrets.token_hex(8)}@db:5432/app",
        "PLAIN_VALUE": secrets.token_hex(12),
    }  # no token shape: masked only because it came from ${...}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    hyps: list[dict] = []
    for name, (patch, _) in BYPASSES.items():
        (tmp_path / f"{name}.diff").write_text(patch)
        hyps.append({"name": name, "patch": str(tmp_path / f"{name}.diff")})
    hyps.append({"name": "symm-mem-crash", "flags": {"enable-torch-symm-mem": True}})  # its log excerpt is recorded
    db = tmp_path / "state" / "campaign.db"
    data = tiny_playbook(tmp_path, "attacks", hyps, node=node, review={"before_patch": False})
    data["server"]["source"] = {"repo": repo, "ref": "HEAD", "allowed_paths": ["tools/simnode/"]}
    data["server"]["command"] = (
        "env PYTHONPATH={source} {python} -P {source}/tools/simnode/echo_env.py "
        + SIM_COMMAND.removeprefix("{python} -m tools.simnode ")
    )
    data["baseline"]["env"] = {"MY_PAT": "${GITHUB_PAT}", "DB_DSN": "${PGPASS_URL}", "MY_SALT": "${PLAIN_VALUE}"}
    pb = write_playbook(tmp_path / "attacks.yaml", data)
    before = on_node(kind, STATE.format(r=shlex.quote(repo)))

    res = campaign_cli(tmp_path, "run", str(pb), "--db", str(db))
    assert res.returncode == 0, res.stdout + res.stderr
    cid = json.loads(campaign_cli(tmp_path, "status", "--db", str(db), "--json").stdout)[0]["id"]
    show = json.loads(campaign_cli(tmp_path, "show", cid, "--db", str(db), "--json").stdout)
    exps = {e["hypothesis"]: e for e in show["experiments"]}
    # every hostile rename or copy: refused before it reached the node's checkout
    for name, (_patch, reason) in BYPASSES.items():
        exp = exps[name]
        assert exp["verdict"] == "dead_end" and exp["failure_class"] == "patch_refused", (name, exp)
        assert reason in exp["reason"], (name, exp["reason"])
    assert on_node(kind, STATE.format(r=shlex.quote(repo))) == before  # no branch, no worktree, no byte changed
    assert exps["symm-mem-crash"]["verdict"] == "dead_end", exps["symm-mem-crash"]

    # the secret values: the server printed them into its log on the node, and nowhere else holds them
    node_dir = Path(workdir) if workdir else tmp_path
    logs = [p for p in node_dir.rglob("*.log") if values["GITHUB_PAT"] in p.read_text(errors="replace")]
    assert logs, f"the server never echoed the values into a log under {node_dir}: this test would check nothing"
    leaks = files_holding(tmp_path, values, skip=pb, suffixes=(".log",))
    if workdir and not Path(workdir).is_relative_to(tmp_path):
        leaks += [f"on the node: {ln}" for ln in files_holding(Path(workdir), values, suffixes=(".log",))]
    leaks += [f"terminal output: {k}" for k, v in values.items() if v in res.stdout + res.stderr]
    packed = packed_values(db)
    assert packed, "the database holds no compressed values: this scan would check nothing"
    leaks += [f"campaign.db (compressed): {k}" for k, v in values.items() if any(v.encode() in b for b in packed)]
    assert not leaks, "values found in: " + "; ".join(leaks)
    recorded = (tmp_path / "journal" / "attacks.md").read_text() + "".join(b.decode(errors="replace") for b in packed)
    assert "my_pat=***" in recorded and "my_salt=***" in recorded  # the crash's log excerpt was recorded, masked
