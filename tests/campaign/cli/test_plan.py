"""`campaign plan`: the command line and env of every launch, and the load, before
anything starts; what it prints is what a run starts (one launch builder)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

ROOT = Path(__file__).resolve().parents[3]


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1", "MY_HF": "hf_abcdefghij1234"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def _plan(playbook: Path, cwd: Path) -> dict:
    res = cli("plan", str(playbook), "--json", cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_plan_is_what_the_run_starts_and_touches_no_database(tmp_path: Path) -> None:
    playbook = sim_playbook(
        tmp_path,
        [{"name": "smaller-graph", "flags": {"cuda-graph-max-bs": 128}}],
        workloads={
            "parallel": {
                "concurrency": [1, 8],
                "prompts": "diverse",
                "output_tokens": 32,
                "requests_per_level": "C",
                "warmup_requests": 0,
            }
        },
        node={"time_scale": 100},
        verdict={"repeats": {"min": 2, "max": 2, "baseline": 2}, "correctness": {"enabled": False}},
    )
    plan = _plan(playbook, tmp_path)
    assert not (tmp_path / "campaign.db").exists()  # nothing recorded, nothing started
    planned = {launch["name"]: launch["command"] for launch in plan["launches"]}
    assert set(planned) == {"baseline", "smaller-graph"} and "--port <port>" in planned["baseline"]
    w = {x["name"]: x for x in plan["workloads"]}
    assert w["parallel"]["requests"] == {"1": 1, "8": 8} and plan["repeats"]["min"] == 2

    run = cli("run", str(playbook), cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr  # finished: the queue is empty
    store = Store(tmp_path / "campaign.db")
    (campaign,) = store.list_campaigns()
    ran = {
        e.hypothesis: {
            re.sub(r"--port \d+", "--port <port>", text)
            for kind, _seq, text in store.list_artifacts(e.id)
            if kind == "command"
        }
        for e in store.list_experiments(campaign.id)
    }
    assert ran["baseline"] == {planned["baseline"]}
    # a hypothesis's rounds launch the candidate beside a baseline (interleaved): both as planned
    assert ran["smaller-graph"] == {planned["baseline"], planned["smaller-graph"]}


def test_plan_shows_env_references_and_each_engines_documented_launch_on_ssh_and_slurm(tmp_path: Path) -> None:
    data = {
        "name": "gpu",
        "journal": str(tmp_path / "j.md"),
        "node": {"kind": "ssh", "host": "gpu1.invalid", "workdir": "/scratch/c"},  # never contacted
        "server": {"engine": "vllm", "model": "Qwen/Qwen3-8B"},
        "baseline": {"flags": {"tensor-parallel-size": 2}, "env": {"HF_TOKEN": "${MY_HF}"}},
        "workloads": {"w": {"concurrency": [1, 4], "requests_per_level": "max(4, 2*C)"}},
        "hypotheses": [{"name": "prefix-caching", "flags": {"enable-prefix-caching": True}}],
    }
    playbook = tmp_path / "gpu.yaml"
    playbook.write_text(yaml.safe_dump(data))
    res = cli("plan", str(playbook), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "command: vllm serve Qwen/Qwen3-8B --host 0.0.0.0 --port <port> --tensor-parallel-size 2\n" in out
    assert "--tensor-parallel-size 2 --enable-prefix-caching\n" in out
    assert "HF_TOKEN=${MY_HF}" in out and "hf_abcdefghij1234" not in out  # the reference, never its value
    assert "runs on gpu1.invalid over ssh" in out and "C=1: 4, C=4: 8" in out

    data["server"] = {"engine": "sglang", "model": "Qwen/Qwen3-8B", "python": "/opt/sgl/bin/python"}
    data["node"] = {"kind": "slurm", "partition": "h100", "workdir": "/scratch/c"}
    playbook.write_text(yaml.safe_dump(data))
    out = cli("plan", str(playbook), cwd=tmp_path).stdout
    assert "command: /opt/sgl/bin/python -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0" in out
    assert "sbatch --parsable" in out and "--partition=h100" in out
