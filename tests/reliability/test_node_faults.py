"""A misbehaving node, end to end: each hypothesis arms one injected fault on the
simulated node (SIMNODE_FAULT in its env) and the real campaign must classify it,
turn idea faults into dead ends with evidence, retry infrastructure faults a bounded
number of times, and go on to the next hypothesis.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.kill_anywhere import write_playbook
from bench.kill_watch import TAG_ENV, tagged_processes

ROOT = Path(__file__).resolve().parents[2]


def _hypotheses(tmp_path: Path) -> list[dict]:
    fault = "SIMNODE_FAULT"
    # requests 1-2 are the correctness probe, 3.. the sweeps: every fault strikes mid-sweep
    return [
        {"name": "crash-mid-sweep", "env": {fault: "crash_after:3"}},
        {"name": "hang-mid-sweep", "env": {fault: "hang_after:3"}},
        {"name": "http500-always", "env": {fault: "http500_rate:1.0"}},
        {"name": "http500-rare", "env": {fault: "http500_rate:0.01"}},
        {"name": "outage-once", "env": {fault: "unreachable_after:3", "SIMNODE_FAULT_ONCE": str(tmp_path / "fired")}},
        {"name": "outage-always", "env": {fault: "unreachable_after:3"}},
        {"name": "after-the-faults", "flags": {"cuda-graph-max-bs": 256}},
    ]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp_path = tmp_path_factory.mktemp("faults")
    import yaml

    pb = write_playbook(tmp_path, _hypotheses(tmp_path))
    data = yaml.safe_load(pb.read_text())
    data["budget"] = {"max_infra_retries": 1}
    data["review"]["after_no_win_streak"] = None  # one run through every fault, no review gate
    pb.write_text(yaml.safe_dump(data, sort_keys=False))
    db = tmp_path / "state" / "campaign.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: str(tmp_path), "NO_COLOR": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db", str(db), "-q"],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT e.hypothesis, e.attempt, e.status, e.failure_json, v.kind, v.failure_class, v.reason "
        "FROM experiments e LEFT JOIN verdicts v ON v.experiment_id = e.id"
    ).fetchall()
    events = [m for (m,) in con.execute("SELECT message FROM events WHERE kind = 'infrastructure'")]
    con.close()
    by_name = {r[0]: r for r in rows}
    return {"res": res, "rows": rows, "by": by_name, "events": events, "dir": tmp_path}


def test_campaign_finishes_and_leaves_nothing_running(campaign: dict) -> None:
    res = campaign["res"]
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert tagged_processes(campaign["dir"], servers_only=True) == []
    assert campaign["by"]["after-the-faults"][4] in ("win", "inconclusive", "dead_end")
    assert campaign["by"]["after-the-faults"][2] == "finished"  # the campaign went on after the faults


def _failure(row) -> dict:
    return json.loads(row[3]) if row[3] else {}


def test_crash_mid_sweep_is_a_dead_end_with_the_log_evidence(campaign: dict) -> None:
    row = campaign["by"]["crash-mid-sweep"]
    assert row[2] == "failed" and row[4] == "dead_end" and row[5] == "kernel_fault"  # the log's "illegal memory access"
    failure = _failure(row)
    assert failure["phase"] == "load" and "signal 9" in failure["summary"]
    assert any("illegal memory access" in line for line in failure["evidence"])


def test_hang_is_a_dead_end_found_by_the_node_time_timeout(campaign: dict) -> None:
    row = campaign["by"]["hang-mid-sweep"]
    assert row[4] == "dead_end" and row[5] == "hang", row
    assert any("timeout" in line for line in _failure(row)["evidence"])


def test_http_500s_are_an_idea_fault_unless_rare(campaign: dict) -> None:
    always = campaign["by"]["http500-always"]
    assert always[4] == "dead_end" and always[5] == "server_error"
    assert any("HTTP 500" in line for line in _failure(always)["evidence"])
    rare = campaign["by"]["http500-rare"]
    assert rare[2] == "finished" and rare[5] is None  # one error in a hundred: measured, not a failure


def test_outage_is_retried_then_measured(campaign: dict) -> None:
    row = campaign["by"]["outage-once"]
    assert row[2] == "finished" and row[5] is None and row[4] != "dead_end", row
    retries = [m for m in campaign["events"] if m.startswith("outage-once")]
    assert len(retries) == 1 and "unreachable" in retries[0]
    assert (campaign["dir"] / "fired").exists()


def test_persistent_outage_retried_a_bounded_number_of_times_then_inconclusive(campaign: dict) -> None:
    row = campaign["by"]["outage-always"]
    assert row[4] == "inconclusive" and row[5] == "unreachable", row
    assert "infrastructure" in row[6]
    retries = [m for m in campaign["events"] if m.startswith("outage-always")]
    assert len(retries) == 1  # max_infra_retries: 1
    assert len([r for r in campaign["rows"] if r[0] == "outage-always"]) == 1  # retries are not new experiments
