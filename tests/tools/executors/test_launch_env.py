"""The launch environment file of the ssh and Slurm nodes, run for real with the node's
watcher: created 0600 in a 0700 directory, read and deleted before the command starts,
and the base list applied on the node (a secret name is never inherited)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from campaign.domain.server_env import DEFAULT_BASE_ENV, resolve, select
from tools.engines import engine_profile
from tools.executors.remote_shell import (
    WATCHER,
    env_spec_bytes,
    env_spec_path,
    watcher_argv,
    write_private,
)

PROBE = [
    "sh",
    "-c",
    (
        'if [ -e "$SPEC" ]; then echo spec-present; else echo spec-gone; fi; '
        'echo "V=$V HOME=${HOME:-unset} KEY=${OPENAI_API_KEY:-unset} NODE=${NODE_ONLY:-unset}"'
    ),
]


def _run_watcher(tmp_path: Path, spec: str, env: dict[str, str]) -> tuple[str, str]:
    log = str(tmp_path / "server.log")
    argv = watcher_argv(sys.executable, PROBE, log_path=log, env_spec=spec, cwd=str(tmp_path))
    assert argv[2] == WATCHER and not any("secret-value" in a for a in argv)  # nothing of the env in argv
    with open(log, "ab") as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=60, check=False)
    return Path(log).read_text(), Path(log + ".rc").read_text()


def test_env_file_is_private_read_and_deleted_before_the_command(tmp_path: Path) -> None:
    spec = env_spec_path(str(tmp_path / "node"), str(tmp_path / "server.log"))
    write_private(spec, env_spec_bytes({"V": "secret-value", "SPEC": spec}, None))
    assert stat.S_IMODE(os.stat(spec).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(spec)).st_mode) == 0o700
    node_env = {"PATH": os.environ["PATH"], "HOME": "/home/node", "OPENAI_API_KEY": "sk-node", "NODE_ONLY": "x"}
    text, rc = _run_watcher(tmp_path, spec, node_env)
    assert text.split("\n")[:2] == ["spec-gone", "V=secret-value HOME=/home/node KEY=unset NODE=unset"]
    assert rc == "0" and not os.path.exists(spec) and os.listdir(os.path.dirname(spec)) == []


def test_a_secret_name_is_never_inherited_whatever_the_list(tmp_path: Path) -> None:
    spec = write_private(env_spec_path(str(tmp_path), "x.log"), env_spec_bytes({}, ["*"]))
    text, _ = _run_watcher(tmp_path, spec, {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-node", "NODE_ONLY": "x"})
    assert "KEY=unset NODE=x" in text
    assert select({"OPENAI_API_KEY": "k", "HF_TOKEN": "t", "LC_ALL": "C"}, ["*"]) == {"LC_ALL": "C"}


def test_missing_env_file_fails_the_launch_with_a_logged_reason(tmp_path: Path) -> None:
    text, rc = _run_watcher(tmp_path, str(tmp_path / "gone.json"), {"PATH": os.environ["PATH"]})
    assert rc == "127" and "cannot read the launch environment" in text


def test_engine_variables_join_the_default_unless_the_playbook_sets_the_list() -> None:
    vllm = engine_profile("vllm")
    assert vllm.base_env_for(None) == resolve(None, vllm.own_env)
    assert set(DEFAULT_BASE_ENV) < set(vllm.base_env_for(None)) and "VLLM_*" in vllm.base_env_for(None)
    assert vllm.base_env_for(["PATH"]) == ["PATH"]
    assert engine_profile("simulated").base_env_for(None) == list(DEFAULT_BASE_ENV)
