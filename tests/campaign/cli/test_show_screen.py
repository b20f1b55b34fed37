"""`campaign show` fits a screen: a line per experiment with the level that decided it;
`--experiment NAME` gives one experiment in full; an unknown name is one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.playbook.schema import HypothesisSpec, Playbook, VerdictSpec
from campaign.store import Store
from campaign.verdict.rule import compare_levels, decide

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = {"name": "screen", "workloads": {"parallel": {"concurrency": [1, 10, 70]}}}
BASE = {1: 80.0, 10: 350.0, 70: 520.0}


def seed(tmp_path: Path, n: int) -> tuple[Path, str]:
    """A baseline and `n` experiments with real verdicts: wins, losses and ties."""
    pb = Playbook.model_validate(PLAYBOOK)
    db = tmp_path / "campaign.db"
    store = Store(db)
    cid = store.create_campaign(pb.name, playbook=pb.model_dump(mode="json"), node="sim-0").id
    base = store.start_experiment(cid, "baseline", role="baseline", config=EffectiveConfig(), node="sim-0")
    store.finish_experiment(base.id, node_seconds=10.0)
    store.update_campaign(cid, baseline_experiment_id=base.id)
    spec = VerdictSpec()
    for i in range(n):
        name = f"idea-with-a-rather-long-name-{i}"
        gain = (0.12, -0.4, 0.0)[i % 3]  # a win at C=70, a loss everywhere, nothing
        store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags={"knob": i}))
        exp = store.start_experiment(
            cid, name, config=EffectiveConfig(flags={"knob": i}), node="sim-0", baseline_ref=base.id
        )
        for rep in range(3):
            for c, b in BASE.items():
                jitter = 1 + 0.002 * (rep - 1)
                cand = b * (1 + gain) if (gain < 0 or c == 70) else b
                for side, value in (("baseline", b), ("candidate", cand)):
                    store.record_run(
                        exp.id,
                        side,
                        rep,
                        "parallel",
                        LevelResult(concurrency=c, requests=c, output_tokens_per_s=value * jitter),
                        work="w",
                        node="sim-0",
                    )
        store.record_verdict(exp.id, decide(compare_levels(store.level_samples(exp.id), spec), spec))
        store.finish_experiment(exp.id, node_seconds=60.0)
    return db, cid


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_show_is_a_line_per_experiment_within_the_screen(tmp_path: Path) -> None:
    db, cid = seed(tmp_path, 9)
    res = cli("show", cid, "--db", str(db), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) <= 9 + 4, res.stdout  # a head line, the column names, a line each, the hint
    assert all(len(ln) <= 100 for ln in lines), res.stdout
    rows = [ln for ln in lines if ln.lstrip()[:1].isdigit()]
    assert len(rows) == 9
    assert "WIN (not adopted)" not in rows[0] and "WIN" in rows[0] and "+12.0% faster [" in rows[0], rows[0]
    assert "at parallel C=70" in rows[0] or rows[0].endswith("…")
    assert "DEAD END (slower)" in rows[1] and "-40.0% slower [" in rows[1]
    assert f"campaign show {cid} --experiment NAME" in lines[-1]


def test_show_experiment_gives_its_section_and_an_unknown_name_is_one_line(tmp_path: Path) -> None:
    db, cid = seed(tmp_path, 2)
    res = cli("show", cid, "--db", str(db), "--experiment", "idea-with-a-rather-long-name-0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "Tried: --knob 0" in out and "Decided: WIN: +12.0% faster [" in out and "at parallel C=70" in out
    assert "Next: not adopted: the playbook does not set adopt_if_win" in out
    bad = cli("show", cid, "--db", str(db), "--experiment", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "no experiment 'nope'" in bad.stderr
    assert "idea-with-a-rather-long-name-0, idea-with-a-rather-long-name-1" in bad.stderr
