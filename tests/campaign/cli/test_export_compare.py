"""`campaign export` and `campaign compare` on a small real campaign (the simulated node,
the real loop, a real SQLite file), run once for the module through the CLI."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaign.domain.models import EffectiveConfig, LevelResult, Stat
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

ROOT = Path(__file__).resolve().parents[3]
WORKLOADS = {
    "single_stream": {
        "concurrency": [1],
        "prompts": "fixed",
        "output_tokens": 32,
        "requests_per_level": 2,
        "warmup_requests": 0,
    },
    "parallel": {
        "concurrency": [1, 4],
        "prompts": "diverse",
        "output_tokens": 32,
        "requests_per_level": "C",
        "warmup_requests": 0,
    },
}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("demo")
    pb = sim_playbook(
        tmp,
        [{"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}}],
        name="tiny",
        workloads=WORKLOADS,
        verdict={"min_effect_pct": 3, "repeats": {"min": 2, "max": 2}, "correctness": {"enabled": False}},
    )
    res = cli("run", str(pb), "-q", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    (campaign,) = Store(tmp / "campaign.db").list_campaigns()
    return tmp / "campaign.db", campaign.id


def _number(text: str) -> float:
    return float(text)


def test_export_csv_round_trips_every_level_measurement(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = demo
    res = cli("export", cid, "--db", str(db), "--format", "csv", "-o", str(tmp_path / "levels.csv"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "levels.csv").read_text())))
    store = Store(db)
    recorded = [(e, r) for e in store.list_experiments(cid) for r in store.runs_for(e.id)]
    assert len(recorded) >= 12 and len(rows) == len(recorded)  # the baseline's and the experiment's launches
    by_key = {(r["experiment_id"], r["side"], int(r["launch"]), r["workload"], int(r["concurrency"])): r for r in rows}
    assert len(by_key) == len(rows)
    for exp, run in recorded:
        row = by_key[(exp.id, run.side, run.repeat, run.workload, run.concurrency)]
        assert (row["hypothesis"], row["role"], row["work"], row["node"]) == (
            exp.hypothesis,
            exp.role,
            run.work,
            run.node,
        )
        result = run.result
        for name in ("requests", "errors", "output_tokens", "input_tokens"):
            assert int(row[name]) == getattr(result, name)
        for name in ("duration_s", "output_tokens_per_s", "requests_per_s"):
            assert _number(row[name]) == getattr(result, name)  # exact: no rounding on the way out
        for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            for stat in ("mean", "p50", "p90", "p99"):
                assert _number(row[f"{metric}_{stat}"]) == getattr(getattr(result, metric), stat)
        assert row["token_source"] == result.token_source and json.loads(row["error_samples"]) == result.error_samples
    # the simulated node's latency is modelled: a 512-token prefill, queued behind the others at C=4
    assert all(_number(r["ttft_ms_p50"]) > 0 and _number(r["itl_ms_p99"]) > 0 for r in rows)
    ttft = {
        c: [_number(r["ttft_ms_p50"]) for r in rows if r["workload"] == "parallel" and r["concurrency"] == str(c)]
        for c in (1, 4)
    }
    assert min(ttft[4]) > max(ttft[1]) > 20
    assert all(1 < _number(r["tpot_ms_p50"]) < 100 for r in rows)


def test_export_json_holds_the_same_measurements(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = demo
    as_json = json.loads(cli("export", cid, "--db", str(db), "--format", "json", cwd=tmp_path).stdout)
    as_csv = list(csv.DictReader(io.StringIO(cli("export", cid, "--db", str(db), cwd=tmp_path).stdout)))
    assert as_json["columns"] == list(as_csv[0])
    assert [{k: str(v) for k, v in m.items()} for m in as_json["measurements"]] == as_csv


def test_export_refuses_an_unknown_campaign_and_a_missing_folder(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = demo
    for args, words in (
        (("nope",), "no such campaign"),
        ((cid, "-o", str(tmp_path / "no" / "x.csv")), "does not exist"),
    ):
        res = cli("export", *args, "--db", str(db), cwd=tmp_path)
        assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def test_compare_two_experiments_prints_level_tables_and_a_verdict(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = demo
    res = cli("compare", f"{cid}:baseline", f"{cid}:smaller-cuda-graph", "--db", str(db), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"A: {cid}:baseline = baseline side of {cid}.baseline.1" in out
    assert f"B: {cid}:smaller-cuda-graph = candidate side of {cid}.smaller-cuda-graph.1" in out
    assert "single_stream: B against A" in out and "parallel: B against A" in out
    assert "TTFT p50/p99 ms: B (A)" in out
    assert "verdict (B as the candidate, A as the baseline): " in out and "node noise" in out
    verdict = " ".join(out.split("verdict (B as the candidate, A as the baseline): ")[1].split())
    assert " bar" in verdict and "needed: whole interval" in verdict, verdict  # the journal's reading
    doc = json.loads(
        cli("compare", f"{cid}:baseline", f"{cid}:smaller-cuda-graph", "--db", str(db), "--json", cwd=tmp_path).stdout
    )
    assert [(r["workload"], r["concurrency"]) for r in doc["rows"]] == [
        ("single_stream", 1),
        ("parallel", 1),
        ("parallel", 4),
    ]
    assert doc["verdict"]["kind"] in ("win", "dead_end", "inconclusive") and doc["verdict"]["levels"]
    # the campaign alone names its current baseline: the same configuration as ID:baseline
    same = json.loads(cli("compare", cid, f"{cid}:baseline", "--db", str(db), "--json", cwd=tmp_path).stdout)
    assert {r["comparison"]["delta_pct"] for r in same["rows"]} == {0.0}


def test_compare_refuses_other_workloads_in_one_line(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = demo
    store = Store(db)
    other = store.create_campaign("other", playbook={"name": "other", "workloads": {"chat": {"concurrency": [1]}}}).id
    exp = store.start_experiment(other, "baseline", role="baseline", config=EffectiveConfig(), node="sim-0")
    store.record_side(
        exp.id,
        "baseline",
        0,
        [("chat", LevelResult(concurrency=1, requests=2, output_tokens_per_s=50, ttft_ms=Stat(p50=10)), "w")],
    )
    store.finish_experiment(exp.id)
    store.update_campaign(other, baseline_experiment_id=exp.id)
    for a, b, words in (
        (cid, other, "measured workloads parallel, single_stream;"),
        (f"{cid}:nope", other, "no measured experiment of that name"),
    ):
        res = cli("compare", a, b, "--db", str(db), cwd=tmp_path)
        assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
