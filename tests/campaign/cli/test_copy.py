"""`campaign copy`: a campaign halted at a review gate on SQLite moves to PostgreSQL with its
checkpoints and resumes there to the end; copied back to a new SQLite file it shows the
same record; a copy onto a database that has the campaign is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.campaign.sim_playbook import campaign_cli, tiny_playbook, write_playbook
from tests.pgdb import fresh_database

HYPS = [
    {"name": "flashinfer-allreduce-fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
    {"name": "smaller-cuda-graph", "flags": {"cuda-graph-max-bs": 128}},
]


def _show(tmp_path: Path, cid: str, db: str) -> dict:
    out = campaign_cli(tmp_path, "show", cid, "--json", "--db", db)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    return {"status": doc["status"], "experiments": [(e["hypothesis"], e["verdict"]) for e in doc["experiments"]]}


@pytest.mark.slow
def test_a_halted_campaign_moves_to_postgresql_resumes_there_and_comes_back(tmp_path: Path) -> None:
    db = str(tmp_path / "state" / "campaign.db")
    pb = write_playbook(
        tmp_path / "playbook.yaml", tiny_playbook(tmp_path, "moving", HYPS, review={"after_consecutive_dead_ends": 1})
    )
    run = campaign_cli(tmp_path, "run", str(pb), "-q")
    assert run.returncode == 3, run.stdout + run.stderr  # halted at the review gate
    cid = json.loads(campaign_cli(tmp_path, "status", "--json", "--db", db).stdout)[0]["id"]
    with fresh_database() as url:
        moved = campaign_cli(tmp_path, "copy", "--from", f"sqlite:///{db}", "--to", url)
        assert moved.returncode == 0 and f"{cid}: copied (" in moved.stdout, moved.stdout + moved.stderr
        assert _show(tmp_path, cid, url) == _show(tmp_path, cid, db)
        twice = campaign_cli(tmp_path, "copy", "--from", db, "--to", url)
        assert twice.returncode == 2 and twice.stderr.count("\n") == 1 and "already in the destination" in twice.stderr

        resumed = campaign_cli(tmp_path, "resume", cid, "--approve", "-q", "--db", url)
        assert resumed.returncode == 0 and f"campaign {cid} finished" in resumed.stdout, resumed.stdout + resumed.stderr
        on_pg = _show(tmp_path, cid, url)
        assert on_pg["status"] == "finished" and [h for h, _ in on_pg["experiments"]] == [h["name"] for h in HYPS]
        assert _show(tmp_path, cid, db)["status"] == "awaiting_review"  # the source is only read

        back = str(tmp_path / "back.db")
        home = campaign_cli(tmp_path, "copy", "--from", url, "--to", f"sqlite:///{back}")
        assert home.returncode == 0, home.stderr
        assert _show(tmp_path, cid, back) == on_pg
