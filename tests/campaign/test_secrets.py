"""Secrets never reach a record: a real campaign on the simulated node runs with tokens
in the controller's environment and referenced from the playbook's env (baseline and
hypothesis, `NAME: ${NAME}`), then every byte of every file it wrote (database, WAL,
checkpoints, journal, plots, ledger, server logs) and its terminal output are searched
for the secret values.  A secret written literally into a playbook is refused.  On the
node (local, ssh, Slurm): no command line holds a secret while the server runs, the
server's /proc/PID/environ holds only what it references, no file is left behind.
Values under plain names, masked by value on every node kind, are in
tests/campaign/loop/test_attacks_on_nodes.py.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import yaml

from tests.campaign.leaks import files_holding, packed_values
from tests.campaign.sim_playbook import tiny_playbook

ROOT = Path(__file__).resolve().parents[2]


def _secret(prefix: str = "") -> str:
    return prefix + secrets.token_hex(12)


def _playbook(tmp_path: Path, baseline_env: dict[str, str], hyp_env: dict[str, str]) -> Path:
    data = tiny_playbook(
        tmp_path,
        "secrets",
        [
            {"name": "nccl-tree-with-token", "env": {"NCCL_ALGO": "Tree", **hyp_env}},
            {"name": "symm-mem-crash", "flags": {"enable-torch-symm-mem": True}},
        ],
    )
    data["baseline"]["env"] = baseline_env
    data["workloads"]["single"]["concurrency"] = [1, 2]
    path = tmp_path / "playbook" / "secrets.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(tmp_path: Path, pb: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db", str(tmp_path / "state" / "campaign.db")],
        cwd=tmp_path,
        env=full,
        text=True,
        capture_output=True,
        timeout=240,
    )


def test_no_secret_reaches_any_record(tmp_path: Path) -> None:
    in_env = {
        "HF_TOKEN": _secret("hf_"),
        "OPENAI_API_KEY": _secret("sk-"),
        "MY_SERVICE_SECRET": _secret(),
        "SOME_TOKEN": _secret(),
        "BASELINE_AUTH_TOKEN": _secret(),
        "HYPOTHESIS_API_TOKEN": _secret(),
        "CHANNELS": "4",
    }
    baseline_env = {
        "BASELINE_AUTH_TOKEN": "${BASELINE_AUTH_TOKEN}",
        "MY_SERVICE_SECRET": "${MY_SERVICE_SECRET}",
        "NCCL_MIN_NCHANNELS": "${CHANNELS}",
    }
    hyp_env = {"HYPOTHESIS_API_TOKEN": "${HYPOTHESIS_API_TOKEN}", "HF_TOKEN": "${HF_TOKEN}", "NCCL_ALGO": "Tree"}
    pb = _playbook(tmp_path, baseline_env, hyp_env)
    res = _run(tmp_path, pb, in_env)
    assert res.returncode == 0, res.stdout + res.stderr
    # the run really happened: a record, a journal with both hypotheses, server logs
    db = tmp_path / "state" / "campaign.db"
    assert db.exists() and (tmp_path / "state" / "campaign-checkpoints.sqlite").exists()
    journal = (tmp_path / "journal" / "secrets.md").read_text()
    assert "nccl-tree-with-token" in journal and "symm-mem-crash" in journal
    assert list(tmp_path.rglob("*.log")), "no server logs were written"
    secret_values = {k: v for k, v in in_env.items() if k != "CHANNELS"}
    leaks = files_holding(tmp_path, secret_values, skip=pb)
    leaks += [f"terminal output: {k}" for k, v in secret_values.items() if v in res.stdout + res.stderr]
    packed = packed_values(db)
    assert packed, "the database holds no compressed values: this scan would check nothing"
    leaks += [
        f"campaign.db (compressed): {k}" for k, v in secret_values.items() if any(v.encode() in b for b in packed)
    ]
    assert not leaks, "secrets found in: " + "; ".join(leaks)
    # the references were expanded at launch: the server reports the NCCL_MIN_NCHANNELS it was given
    con = sqlite3.connect(db)
    reported = " ".join(
        zlib.decompress(z).decode() if z else c
        for c, z in con.execute("SELECT content, content_z FROM artifacts WHERE kind='reported_config'")
    )
    con.close()
    assert '"NCCL_MIN_NCHANNELS":"4"' in reported.replace(" ", ""), reported[-300:]
    assert "${HYPOTHESIS_API_TOKEN}" in journal  # the record says which variable was set, not its value


def test_literal_secret_in_playbook_refused(tmp_path: Path) -> None:
    token = _secret("hf_")
    pb = _playbook(tmp_path, {}, {"HF_TOKEN": token})
    res = _run(tmp_path, pb, {})
    assert res.returncode == 2 and "Traceback" not in res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "hypotheses[0].env.HF_TOKEN" in line and "${HF_TOKEN}" in line and token not in line
    assert not (tmp_path / "state" / "campaign.db").exists()


@pytest.mark.parametrize(
    ("where", "name", "value"),
    [
        ("flags", "api-key", "sk-" + "a1" * 12),
        ("flags", "hf-token", "plainvalue123"),
        ("flags", "model-url", "https://user:pa55word@models.example/x"),
        ("env", "MY_PAT", "github_pat_" + "b2" * 15),
        ("env", "DB_DSN", "postgres://app:db58secret@db:5432/app"),
        ("env", "AWS_ID", "AKIA" + "Q" * 16),
    ],
)
def test_literal_token_in_a_flag_or_plain_env_name_is_refused(
    tmp_path: Path, where: str, name: str, value: str
) -> None:
    pb = _playbook(tmp_path, {}, {})
    data = yaml.safe_load(pb.read_text())
    data["hypotheses"][1].setdefault(where, {})[name] = value
    pb.write_text(yaml.safe_dump(data, sort_keys=False))
    for command in ("validate", "run"):
        res = subprocess.run(
            [sys.executable, "-m", "campaign.cli.main", command, str(pb)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            text=True,
            capture_output=True,
            timeout=120,
        )
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stdout + res.stderr
        (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert f"hypotheses[1].{where}.{name}" in line and "a secret written into the playbook" in line, line
        assert ("${" + name + "}" if where == "env" else "give the secret by environment") in line
        assert value not in res.stdout + res.stderr
    assert not (tmp_path / "state" / "campaign.db").exists()


def test_missing_reference_stops_with_one_line(tmp_path: Path) -> None:
    pb = _playbook(tmp_path, {"ABSENT_TOKEN": "${ABSENT_TOKEN}"}, {})
    env = {k: v for k, v in os.environ.items() if k != "ABSENT_TOKEN"}
    res = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "run", str(pb)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "export ABSENT_TOKEN" in res.stderr


# -- on the node: local, ssh and Slurm ------------------------------------------------
SIM = {"profile": "rtx6000bw-pcie-8x", "cuda": "12.8", "seed": 1, "time_scale": 400, "noise_pct": 1.0}


def _node_section(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    from tests.campaign.remote_node import node_section

    return node_section(kind, SIM, tmp_path, "secrets")[0]


class _Recording:
    """The node's executor, remembering the handles it started (the server's pid)."""

    def __init__(self, inner) -> None:
        self.inner, self.handles = inner, []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def start(self, *args, **kw):
        self.handles.append(self.inner.start(*args, **kw))
        return self.handles[-1]


def _command_lines(executor) -> str:
    here = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True, timeout=30, check=True)
    node = executor.run(["ps", "-eww", "-o", "args="], timeout=30)
    assert node.returncode == 0, node.stderr
    return here.stdout + node.stdout


def _environ(executor, pid: int) -> dict[str, str]:
    res = executor.run(["cat", f"/proc/{pid}/environ"], timeout=30)
    assert res.returncode == 0, res.stderr
    return dict(item.split("=", 1) for item in res.stdout.split("\0") if "=" in item)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("local"),
        pytest.param("ssh", marks=pytest.mark.cluster),
        pytest.param("slurm", marks=pytest.mark.cluster),
    ],
)
def test_secrets_on_the_node(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated server launched on a local, an ssh and a Slurm node with a secret
    referenced as ${HF_TOKEN}: while it runs, no command line (here or on the node)
    holds a secret, its /proc/PID/environ holds the referenced one but not the
    controller's OPENAI_API_KEY nor any variable off the base list; afterwards no
    file in the node's workdir holds either."""
    from campaign.cli.wiring import node_runtime_for
    from campaign.domain.models import EffectiveConfig
    from campaign.domain.server_env import matches
    from campaign.playbook.schema import Playbook
    from tools.executors.base import LAUNCH_TOKEN_ENV
    from tools.executors.local import TOKEN_ENV

    hf_token, api_key = _secret("hf_"), _secret("sk-")
    monkeypatch.setenv("HF_TOKEN", hf_token)
    monkeypatch.setenv("OPENAI_API_KEY", api_key)
    monkeypatch.setenv("UNLISTED_CONTROLLER_VAR", "controller-only")
    data = yaml.safe_load(_playbook(tmp_path, {}, {}).read_text())
    data["node"] = _node_section(kind, tmp_path, monkeypatch)
    pb = Playbook.model_validate(data)
    runtime = node_runtime_for(pb, pb.node, workdir=tmp_path / "node")
    runtime.executor = recorder = _Recording(runtime.executor)
    base = runtime.profile.base_env_for(
        runtime.base_env
    )  # what the launch gets: the playbook's list, else the profile's
    seen: dict[str, object] = {}

    def on_ready(event: str, info: dict) -> None:
        if event == "ready":  # the server runs: look at it from outside
            seen["commands"] = _command_lines(recorder)
            seen["environ"] = _environ(recorder, recorder.handles[-1].pid)

    runtime.progress = on_ready
    config = EffectiveConfig(
        flags={"cuda-graph-max-bs": 512}, env={"HF_TOKEN": "${HF_TOKEN}", "NCCL_MIN_NCHANNELS": "4"}
    )
    try:
        out = runtime.measure(config, list(pb.workloads.values()), label="secrets")
        assert out.failure is None and out.sweeps, out.failure
        assert seen, "the server never came up"
        on_command_lines = [
            n for n, v in (("HF_TOKEN", hf_token), ("OPENAI_API_KEY", api_key)) if v in str(seen["commands"])
        ]
        assert not on_command_lines, f"on a command line: {on_command_lines}"
        environ = seen["environ"]
        assert environ.get("HF_TOKEN") == hf_token and environ.get("NCCL_MIN_NCHANNELS") == "4", sorted(environ)
        assert api_key not in "\0".join(environ.values()), "an unreferenced controller secret reached the server"
        # the launch token names this launch for the reaper (Executor.find_by_token): an id, not a secret
        extra = sorted(
            k
            for k in environ
            if k not in config.env
            and k not in {TOKEN_ENV, LAUNCH_TOKEN_ENV, "PYTHONPATH", "PWD", "SHLVL", "_"}
            and not matches(k, base)
        )
        assert not extra, f"variables off the base list reached the server: {extra}"
        assert "UNLISTED_CONTROLLER_VAR" not in environ
        assert not any(v in out.model_dump_json() for v in (hf_token, api_key)), "a secret in the measurement"
        local_copy = tmp_path / "node-copy"
        recorder.get(runtime.workdir, str(local_copy))
        assert list(local_copy.rglob("*.log")), "no server log in the node's workdir"
        leaks = files_holding(local_copy, {"HF_TOKEN": hf_token, "OPENAI_API_KEY": api_key})
        assert not leaks, "secrets left on the node: " + "; ".join(leaks)
    finally:
        if kind == "ssh":
            recorder.run(["rm", "-rf", runtime.workdir], timeout=60)
        recorder.close()


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("local"),
        pytest.param("ssh", marks=pytest.mark.cluster),
        pytest.param("slurm", marks=pytest.mark.cluster),
    ],
)
def test_the_servers_own_key_reaches_it_and_nothing_else_does(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that requires its own API key (SIMNODE_API_KEY, like `--api-key`) is
    measured when the playbook names the key's variable (`server.api_key_env`); without
    that, its requests are refused (401): the controller's OPENAI_API_KEY is never sent."""
    from campaign.cli.wiring import node_runtime_for
    from campaign.domain.models import EffectiveConfig
    from campaign.playbook.schema import Playbook

    server_key = _secret("srv-")
    monkeypatch.setenv("SERVER_KEY", server_key)
    monkeypatch.setenv("OPENAI_API_KEY", server_key)  # would pass, if it were ever sent
    data = yaml.safe_load(_playbook(tmp_path, {}, {}).read_text())
    data["node"] = _node_section(kind, tmp_path, monkeypatch)
    config = EffectiveConfig(flags={"cuda-graph-max-bs": 512}, env={"SIMNODE_API_KEY": "${SERVER_KEY}"})
    outcomes = {}
    for declared in (False, True):
        data["server"]["api_key_env"] = "SERVER_KEY" if declared else None
        pb = Playbook.model_validate(data)
        runtime = node_runtime_for(pb, pb.node, workdir=tmp_path / f"node-{declared}")
        try:
            out = runtime.measure(config, list(pb.workloads.values()), label=f"key-{declared}")
        finally:
            if kind == "ssh":
                runtime.executor.run(["rm", "-rf", runtime.workdir], timeout=60)
            runtime.executor.close()
        outcomes[declared] = out
        assert server_key not in out.model_dump_json()
    assert outcomes[True].failure is None and outcomes[True].sweeps, outcomes[True].failure
    refused = outcomes[False]
    assert refused.failure is not None and "401" in refused.model_dump_json(), refused.failure
