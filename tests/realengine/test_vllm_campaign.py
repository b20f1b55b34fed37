"""A short real campaign through the CLI: vLLM on this CPU, two hypotheses (one wins or
loses on measurements, one is a bad-flag dead end), two concurrency levels."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from campaign.store import Store
from tests.realengine.conftest import REPO
from tools.engines import VllmSetup

pytestmark = pytest.mark.realengine

NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}'


def small_playbook(setup: VllmSetup, tmp_path: Path) -> dict:
    return {
        "name": "vllm-cpu-smoke",
        "journal": str(tmp_path / "journal.md"),
        "database": str(tmp_path / "campaign.db"),
        "node": {"kind": "local", "name": "local-cpu", "workdir": str(tmp_path / "node")},
        "server": {
            "engine": "vllm",
            "model": setup.model_medium,
            "startup_timeout_s": 240,
            "command": f"{setup.python} -m vllm.entrypoints.openai.api_server --model {{model}} "
            "--host {host} --port {port} --dtype float32 {flags}",
        },
        "baseline": {
            "flags": {"max-model-len": 1024, "enforce-eager": True},
            "env": {
                "VLLM_HOST_IP": "127.0.0.1",
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "VLLM_CACHE_ROOT": setup.cache_root,
            },
        },
        "workloads": {
            "sweep": {
                "concurrency": [1, 16],
                "prompts": "diverse",
                "prompt_tokens": 64,
                "output_tokens": 32,
                "requests_per_level": "max(4, C)",
                "warmup_requests": 1,
            }
        },
        "verdict": {
            "min_effect_pct": 5,
            "repeats": {"min": 2, "max": 2, "baseline": 2},  # a smoke test: no floor
            "correctness": {"enabled": True, "prompts": 2, "max_tokens": 8, "tolerance": 0.5},
        },
        "budget": {"max_experiments": 4, "max_hours": 1},
        "planner": {"kind": "queue"},
        "hypotheses": [
            {"name": "bad-flag-value", "flags": {"max-num-seqs": "many"}},
            {"name": "ngram-spec", "flags": {"speculative-config": NGRAM}},
        ],
    }


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(1800)
def test_campaign_reaches_verdicts(vllm_setup: VllmSetup, tmp_path: Path) -> None:
    playbook = tmp_path / "playbook.yaml"
    playbook.write_text(yaml.safe_dump(small_playbook(vllm_setup, tmp_path), sort_keys=False))
    db = str(tmp_path / "campaign.db")
    t0 = time.monotonic()
    run = cli("run", str(playbook), "--db", db, "-q", timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    took = time.monotonic() - t0

    status = cli("status", "--db", db, "--json", timeout=60)
    assert status.returncode == 0, status.stderr
    (campaign,) = json.loads(status.stdout)
    assert campaign["status"] == "finished", campaign
    campaign_id = campaign["id"]
    shown = cli("show", campaign_id, "--db", db, "--json", timeout=60)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    experiments = {e["hypothesis"]: e for e in record["experiments"]}

    bad = experiments["bad-flag-value"]
    assert (bad["verdict"], bad["failure_class"]) == ("dead_end", "bad_flag")
    assert "invalid int value: 'many'" in bad["reason"]
    ngram = experiments["ngram-spec"]
    assert ngram["verdict"] in {"win", "dead_end", "inconclusive"} and ngram["failure_class"] is None
    levels = ngram["metrics"]["sweep"]
    assert set(levels) == {"1", "16"}
    assert all(lv["candidate"] and lv["baseline"] for lv in levels.values())
    # what the servers reported (vLLM's start-up log): the speculative config moved, as
    # declared, and nothing the hypothesis does not declare confounds the run
    reported = {r["key"]: r for r in ngram["reported_diff"]}
    assert reported["speculative-config"]["status"] == "declared", ngram["reported_diff"]
    assert "ngram" in reported["speculative-config"]["candidate"]
    assert ngram["confounded_by"] == [], ngram["confounded_by"]
    # the node's fingerprint carries the engine's installed version, read with the
    # playbook's interpreter: what a "revisit when engine_version changes" compares
    installed = subprocess.run(
        [
            vllm_setup.python,
            "-c",
            "import importlib.metadata as m; print(m.version(m.packages_distributions()['vllm'][0]))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    fingerprint = Store(db).latest_fingerprint(campaign_id)
    assert fingerprint is not None and installed
    assert (fingerprint.engine, fingerprint.engine_version) == ("vllm", installed)
    assert took < 480
