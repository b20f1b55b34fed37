"""A kill between "finished" in the record and the journal render left a journal that
said "awaiting review ... campaign resume --approve" forever, and `resume` refused
("is finished").  Every command that opens a campaign re-renders a journal older than
its record; temp files of an interrupted journal or plot write are removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.kill_anywhere import write_playbook
from campaign.journal.render import clean_temp_files
from campaign.playbook.load import load_playbook
from campaign.store import Store

ROOT = Path(__file__).resolve().parents[2]
STALE = "# journal\n\n| status | awaiting review: 2 ideas without a win |\n\nDecide with one of: campaign resume X --approve\n"


def _finished_campaign(tmp_path: Path) -> tuple[str, Path, Path]:
    pb_path = write_playbook(tmp_path)
    pb = load_playbook(str(pb_path))
    db = Path(pb.database)
    store = Store(db)
    cid = store.create_campaign(pb.name, playbook=pb, playbook_path=str(pb_path), node="sim").id
    for pos, h in enumerate(pb.hypotheses):
        store.upsert_hypothesis(cid, h, source="playbook", position=pos)
    journal = Path(pb.journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text(STALE)
    os.utime(journal, (1_000_000, 1_000_000))  # rendered before the record moved on
    store.update_campaign(cid, status="finished", halt_reason="hypothesis queue exhausted")
    return cid, db, journal


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )


def test_resume_of_a_finished_campaign_repairs_its_journal(tmp_path: Path) -> None:
    cid, db, journal = _finished_campaign(tmp_path)
    res = _cli("resume", cid, "--db", str(db), cwd=tmp_path)
    assert res.returncode == 2 and "is finished" in res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    text = journal.read_text()
    assert "| status | finished" in text and "awaiting review" not in text


def test_status_repairs_a_journal_older_than_the_record(tmp_path: Path) -> None:
    cid, db, journal = _finished_campaign(tmp_path)
    res = _cli("status", "--db", str(db), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert cid in res.stdout
    assert "| status | finished" in journal.read_text()
    mtime = journal.stat().st_mtime
    assert _cli("status", "--db", str(db), cwd=tmp_path).returncode == 0
    assert journal.stat().st_mtime == mtime  # current: not rendered again


def test_temp_files_of_an_interrupted_write_are_removed(tmp_path: Path) -> None:
    journal = tmp_path / "j" / "kill.md"
    plots = tmp_path / "j" / "kill.plots"
    plots.mkdir(parents=True)
    left = [tmp_path / "j" / ".kill.md.a1b2c3.tmp", plots / ".exp-1.png.tmp", plots / ".campaign-overview.png.tmp"]
    keep = [tmp_path / "j" / ".other.md.x.tmp", tmp_path / "j" / "kill.md", plots / "exp-1.png"]
    for p in left + keep:
        p.write_text("x")
    assert sorted(clean_temp_files(journal)) == sorted(left)
    assert all(p.exists() for p in keep) and not any(p.exists() for p in left)


def test_resume_removes_temp_files(tmp_path: Path) -> None:
    cid, db, journal = _finished_campaign(tmp_path)
    tmp = journal.parent / f".{journal.name}.deadbeef.tmp"
    tmp.write_text("half a journal")
    _cli("resume", cid, "--db", str(db), cwd=tmp_path)
    assert not tmp.exists()
