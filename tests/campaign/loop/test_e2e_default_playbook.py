"""The product's main job, as a user runs it: `campaign run playbooks/eagle_verify.yaml`
halts for review (exit 3), the reviewer upgrades the node to CUDA 13 and resumes in a
new process, and the campaign finishes with the seeds' verdicts.  The shipped playbook
draws fresh launch offsets; here they are replayed from its seed (`launch_offsets:
seeded`, its only change), so the test is one fixed draw: how often fresh draws tell the
story is `bench/demo_runs.py`'s count."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "playbooks" / "eagle_verify.yaml"


def _cli(tmp_path: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _show(tmp_path: Path, cid: str) -> dict:
    r = _cli(tmp_path, "show", cid, "--db", "c.db", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _latest(data: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for e in data["experiments"]:
        if e["hypothesis"] != "baseline" and e["verdict"]:
            out[e["hypothesis"]] = e  # later attempts overwrite earlier ones
    return out


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_default_playbook_halts_for_review_then_resumes_on_cuda13(tmp_path):
    text, n = re.subn(r"(?m)^(\s+launch_offsets:) fresh\b", r"\1 seeded", PLAYBOOK.read_text())
    assert n == 1, "the playbook's node.launch_offsets line"
    playbook = tmp_path / PLAYBOOK.name
    playbook.write_text(text)
    run = _cli(tmp_path, "run", str(playbook), "--db", "c.db")
    assert run.returncode == 3, run.stdout + run.stderr
    status = json.loads(_cli(tmp_path, "status", "--db", "c.db", "--json").stdout)
    (camp,) = status
    cid = camp["id"]
    assert camp["status"] == "awaiting_review"
    assert f"campaign resume {cid} --approve" in run.stdout

    first = _show(tmp_path, cid)
    v = _latest(first)
    assert v["smaller-cuda-graph"]["verdict"] == "win" and v["smaller-cuda-graph"]["adopted"]
    expected = {
        "flashinfer-allreduce-fusion": "jit_error",
        "nccl-tree": "cuda_graph_incompatible",
        "torch-symm-mem": "unsupported_arch",
        "ep-flashinfer-a2a": "assertion",
    }
    for name, cls in expected.items():
        assert (v[name]["verdict"], v[name]["failure_class"]) == ("dead_end", cls), (name, v[name])
    assert v["custom-allreduce-pcie"]["verdict"] == "dead_end"
    assert v["nccl-fewer-channels"]["verdict"] == "inconclusive"
    assert "confounded" in v["nccl-fewer-channels"]["reason"]
    assert "mem-fraction-static" in v["nccl-fewer-channels"]["reason"]
    assert v["eagle3"]["verdict"] == "dead_end"
    # the baseline moved: the adopted smaller CUDA graph is the bar for every later idea
    assert first["baseline"]["config"]["flags"]["cuda-graph-max-bs"] == 128
    single = float(first["baseline"]["figures"]["single_stream"]["1"])
    assert 89.5 * 0.9 <= single <= 89.5 * 1.1
    journal = (tmp_path / "journal" / "eagle-fast-verify.md").read_text()
    assert "awaiting review" in journal and "DEAD END" in journal

    res = _cli(
        tmp_path,
        "resume",
        cid,
        "--db",
        "c.db",
        "--approve",
        "--set",
        "node.cuda=13.0",
        "--note",
        "node upgraded to CUDA 13",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    final = _show(tmp_path, cid)
    assert final["status"] == "finished"
    attempts: dict[str, list[dict]] = {}
    for e in final["experiments"]:
        attempts.setdefault(e["hypothesis"], []).append(e)
    # the CUDA-bound dead ends were re-opened and re-tested; the others were not
    for name in ("flashinfer-allreduce-fusion", "torch-symm-mem", "eagle3"):
        assert len(attempts[name]) == 2, name
        assert attempts[name][1]["failure_class"] is None, attempts[name][1]
    for name in ("custom-allreduce-pcie", "nccl-fewer-channels", "smaller-cuda-graph"):
        assert len(attempts[name]) == 1, name  # not tied to CUDA: never re-opened
    # the EP assertion is tied to the engine version, which the CUDA 13 stack also changed
    assert [e["failure_class"] for e in attempts["ep-flashinfer-a2a"]] == ["assertion", "assertion"]
    eagle = attempts["eagle3"][1]
    assert eagle["verdict"] == "dead_end"
    assert "single_stream" in eagle["reason"] and "parallel" in eagle["reason"]
    m = eagle["metrics"]
    assert m["single_stream"]["1"]["delta_pct"] > 0  # wins the fixed-prompt single stream
    assert all(lv["delta_pct"] < 0 for lv in m["parallel"].values())  # loses the sweep at every C
    final_journal = (tmp_path / "journal" / "eagle-fast-verify.md").read_text()
    assert "finished" in final_journal and "cuda 12.8 -> 13.0" in final_journal
