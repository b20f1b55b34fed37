"""A server that dies at start shows why in all three places a user looks: the terminal,
`campaign show --json` and the journal, each with the log line that says so and the
log's path.  The case from a first-hour report: `engine: vllm` with a `python:` that has
no vLLM, whose log holds one line, `No module named 'vllm'`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
NEEDLE = "No module named 'vllm'"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_a_server_that_dies_at_start_shows_its_log_line_and_path_everywhere(tmp_path: Path) -> None:
    # a real interpreter that cannot import vllm: site-packages off (-S)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    journal = tmp_path / "journal" / "novllm.md"
    playbook = tmp_path / "novllm.yaml"
    playbook.write_text(
        yaml.safe_dump(
            {
                "name": "novllm",
                "journal": str(journal),
                "node": {"kind": "local", "workdir": str(tmp_path / "node")},
                "server": {"engine": "vllm", "python": str(python), "model": "Qwen/Qwen3-8B", "startup_timeout_s": 60},
                "workloads": {"w": {"concurrency": [1], "output_tokens": 8, "requests_per_level": 2}},
                "hypotheses": [{"name": "fewer-seqs", "flags": {"max-num-seqs": 4}}],
            }
        )
    )
    db = tmp_path / "c.db"
    run = cli("run", str(playbook), "--db", str(db), cwd=tmp_path)
    assert run.returncode == 1, (run.stdout, run.stderr)
    terminal = run.stdout + run.stderr
    assert NEEDLE in terminal, terminal
    logs = list((tmp_path / "nodes").rglob("*.log"))
    assert len(logs) == 1 and NEEDLE in logs[0].read_text()
    assert f"log: {logs[0]}" in terminal, terminal

    (campaign_id,) = [c["id"] for c in json.loads(cli("status", "--db", str(db), "--json", cwd=tmp_path).stdout)]
    shown = json.loads(cli("show", campaign_id, "--db", str(db), "--json", cwd=tmp_path).stdout)
    failure = shown["failure"]
    # the node lacks the engine: the environment class (a missing module decides it)
    assert failure["class"] == "environment" and failure["log_path"] == str(logs[0])
    assert any(NEEDLE in line for line in failure["deciding_lines"]), failure

    text = journal.read_text()
    assert NEEDLE in text and str(logs[0]) in text, text
