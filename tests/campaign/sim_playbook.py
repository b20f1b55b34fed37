"""Small playbooks on the simulated node, for tests that run the real loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

FAST_NODE = {
    "kind": "simulated",
    "profile": "rtx6000bw-pcie-8x",
    "cuda": "12.8",
    "seed": 3,
    "time_scale": 25,
    "noise_pct": 1.0,
}


def sim_playbook(tmp_path: Path, hypotheses: list[dict[str, Any]], **over: Any) -> Path:
    """Write a playbook whose journal and database live in tmp_path; returns its path."""
    data: dict[str, Any] = {
        "name": over.pop("name", "test-campaign"),
        "journal": str(tmp_path / "journal" / "test.md"),
        "database": str(tmp_path / "campaign.db"),
        "node": {**FAST_NODE, **over.pop("node", {})},
        "server": {
            "engine": "simulated",
            "model": "sim-model",
            "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
            "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
            "--model-path {model} --tp 8 --stream-interval 8 {flags}",
            "startup_timeout_s": 120,
        },
        "baseline": {"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}},
        "workloads": over.pop(
            "workloads",
            {
                "single_stream": {
                    "concurrency": [1],
                    "prompts": "fixed",
                    "output_tokens": 64,
                    "requests_per_level": 2,
                    "warmup_requests": 0,
                },
                "parallel": {
                    "concurrency": [1, 8],
                    "prompts": "diverse",
                    "output_tokens": 64,
                    "requests_per_level": "C",
                    "warmup_requests": 0,
                },
            },
        ),
        "verdict": {
            "min_effect_pct": 3,
            "repeats": {"min": 2, "max": 4},
            "correctness": {"prompts": 8, "max_tokens": 32},
        },
        "review": over.pop("review", {"after_no_win_streak": 10}),
        "hypotheses": hypotheses,
    }
    data.update(over)
    path = tmp_path / "playbook.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


#: the simulated server's launch command (`{source}`-less: the controller's own code)
SIM_COMMAND = (
    "{python} -m tools.simnode --host {host} --port {port} --profile {profile} --cuda {cuda} --seed {seed} "
    "--time-scale {time_scale} --noise-pct {noise_pct} --model-path {model} --tp 8 {flags}"
)


def tiny_playbook(tmp_path: Path, name: str, hypotheses: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    """The smallest real campaign (seconds): one workload of 2 requests, one repeat, the
    journal under tmp_path/journal/<name>.md and the database tmp_path/state/campaign.db."""
    data: dict[str, Any] = {
        "name": name,
        "journal": str(tmp_path / "journal" / f"{name}.md"),
        "database": str(tmp_path / "state" / "campaign.db"),
        "node": {"kind": "simulated", "seed": 1, "time_scale": 400, "noise_pct": 1.0},
        "server": {"engine": "simulated", "model": "sim-model", "startup_timeout_s": 120, "command": SIM_COMMAND},
        "baseline": {"flags": {"cuda-graph-max-bs": 512}},
        "workloads": {
            "single": {"concurrency": [1], "output_tokens": 16, "requests_per_level": 2, "warmup_requests": 0}
        },
        "verdict": {
            "repeats": {"min": 1, "max": 1},
            "interleave": False,
            "correctness": {"prompts": 2, "max_tokens": 8},
        },
        "hypotheses": hypotheses,
    }
    data.update(over)
    return data


def write_playbook(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def campaign_cli(cwd: Path, *args: str, timeout: float = 400) -> Any:
    """`campaign ARGS` as a user runs it (this checkout's code, no colour, a wide terminal)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
