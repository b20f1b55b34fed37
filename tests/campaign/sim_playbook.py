"""Small playbooks on the simulated node, for tests that run the real loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

FAST_NODE = {"kind": "simulated", "profile": "rtx6000bw-pcie-8x", "cuda": "12.8", "seed": 3,
             "time_scale": 25, "noise_pct": 1.0}


def sim_playbook(tmp_path: Path, hypotheses: list[dict[str, Any]], **over: Any) -> Path:
    """Write a playbook whose journal and database live in tmp_path; returns its path."""
    data: dict[str, Any] = {
        "name": over.pop("name", "test-campaign"),
        "journal": str(tmp_path / "journal" / "test.md"),
        "database": str(tmp_path / "campaign.db"),
        "node": {**FAST_NODE, **over.pop("node", {})},
        "server": {"engine": "simulated", "model": "sim-model",
                   "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
                              "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
                              "--model-path {model} --tp 8 --stream-interval 8 {flags}",
                   "startup_timeout_s": 120},
        "baseline": {"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}},
        "workloads": over.pop("workloads", {
            "single_stream": {"concurrency": [1], "prompts": "fixed", "output_tokens": 64,
                              "requests_per_level": 2, "warmup_requests": 0},
            "parallel": {"concurrency": [1, 8], "prompts": "diverse", "output_tokens": 64,
                         "requests_per_level": "C", "warmup_requests": 0},
        }),
        "verdict": {"min_effect_pct": 3, "repeats": {"min": 2, "max": 4},
                    "correctness": {"prompts": 8, "max_tokens": 32}},
        "review": over.pop("review", {"after_no_win_streak": 10}),
        "hypotheses": hypotheses,
    }
    data.update(over)
    path = tmp_path / "playbook.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
