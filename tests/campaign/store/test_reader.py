"""`campaign journal` reads through plain sqlite3 (campaign.store.reader): the same records
as the Store's, the same journal, and no sqlmodel import."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench import scale_build
from campaign.domain.source import PatchRecord
from campaign.journal.publish import publish_journal
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store
from campaign.store.models import SCHEMA_VERSION
from campaign.store.quick import SCHEMA_VERSION as READER_VERSION
from campaign.store.reader import open_reader

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def rich(tmp_path: Path) -> tuple[Path, str]:
    """A campaign with every kind of record a view shows: wins, dead ends, crashes, an
    adopted baseline, events, model calls (accepted, rejected, failed), a decided review
    with an added hypothesis, an analysis and a patch."""
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 12)
    with Store(db) as store:
        exps = store.list_experiments(cid, role="candidate")
        store.add_event(cid, "environment", "CUDA 12.8 -> 13.0", ts=1.0)
        store.add_event(cid, "drift", "the baseline moved by 2.1% at parallel C=8", ts=2.0)
        store.record_llm_call(
            cid,
            purpose="propose",
            model="m",
            prompt_tokens=900,
            completion_tokens=80,
            latency_ms=1200.0,
            prompt_hash="h1",
            output={"name": "x"},
        )
        store.record_llm_call(
            cid,
            purpose="propose",
            model="m",
            prompt_tokens=900,
            completion_tokens=10,
            latency_ms=300.0,
            prompt_hash="h2",
            rejection="flag `tp` is fixed by the playbook",
        )
        store.record_llm_call(
            cid,
            purpose="analyse",
            model="m",
            prompt_tokens=0,
            completion_tokens=0,
            latency_ms=30000.0,
            prompt_hash="h3",
            rejection="call failed: timeout after 30 s",
        )
        seq = store.request_review(cid, "three dead ends in a row", key="dead-ends@3")
        store.decide_review(
            cid, seq, "approve", note="try the next family", added=[HypothesisSpec(name="from-review", flags={"x": 1})]
        )
        store.record_artifact(exps[1].id, "analysis", "The decode step is shorter; the queue is not.")
        store.record_artifact(
            exps[2].id,
            "patch",
            PatchRecord(
                sha="b" * 40, base="a" * 40, branch="campaign/x/y", files=["python/sglang/srt/a.py"], patches=["p.diff"]
            ).model_dump_json(),
        )
    return db, cid


def _dump(view: object) -> str:
    return json.dumps(view.model_dump(mode="json"), sort_keys=True)  # type: ignore[attr-defined]


def test_the_reader_reads_what_the_store_reads(rich: tuple[Path, str]) -> None:
    db, cid = rich
    reader = open_reader(db)
    assert reader is not None and str(SCHEMA_VERSION) == READER_VERSION
    with Store(db) as store, reader:
        assert reader.get_campaign(cid) == store.get_campaign(cid)
        assert reader.journal_changes(cid, None) == store.journal_changes(cid, None)
        assert reader.journal_changes(cid, 3) == store.journal_changes(cid, 3)
        full = reader.view(cid)
        assert _dump(full) == _dump(store.view(cid))
        assert full.planner_calls and full.reviews and full.environment_changes and full.drift_notes  # each kind
        ids = [e.id for e in full.experiments]  # the candidates
        window = {ids[0], *ids[-3:]}
        assert _dump(reader.view(cid, detail={ids[0]}, window=window)) == _dump(
            store.view(cid, detail={ids[0]}, window=window)
        )
        assert _dump(reader.view(cid, detail={ids[0]}, window=window)) == _dump(
            store.view(cid, detail={ids[0]}, window=window)
        )  # again: from the memo


def test_a_journal_read_by_the_reader_is_the_stores_journal(rich: tuple[Path, str], tmp_path: Path) -> None:
    db, cid = rich
    with Store(db) as store:
        publish_journal(store, cid, tmp_path / "a" / "j.md", plots=False)
    reader = open_reader(db)
    assert reader is not None
    with reader:
        publish_journal(reader, cid, tmp_path / "b" / "j.md", plots=False)
    a, b = tmp_path / "a", tmp_path / "b"
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*.md"))
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*.md")) and len(names) > 12
    for name in names:
        assert (a / name).read_text() == (b / name).read_text(), name


def test_another_schema_version_or_a_foreign_file_is_left_to_the_store(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    with Store(db) as store:
        store.create_campaign("a", playbook={"name": "a"}, campaign_id="a-1")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    assert open_reader(db) is None  # an older file: the Store migrates it
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    assert open_reader(tmp_path / "junk.db") is None
    assert open_reader(tmp_path / "missing.db") is None


def test_the_reader_writes_nothing_and_leaves_a_writer_unblocked(rich: tuple[Path, str]) -> None:
    db, cid = rich
    reader = open_reader(db)
    assert reader is not None
    with reader, Store(db, busy_timeout_ms=200) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader._conn.execute("DELETE FROM events")
        before = reader.view(cid)
        store.add_event(cid, "drift", "written while a reader is open", ts=3.0)  # no lock held between reads
        assert reader.view(cid).drift_notes == [*before.drift_notes, "written while a reader is open"]


def test_campaign_journal_reads_without_importing_sqlmodel(rich: tuple[Path, str], tmp_path: Path) -> None:
    """sqlmodel and SQLAlchemy were half a second of a 2 s render at 1,000 experiments."""
    db, cid = rich
    out = tmp_path / "cli" / "j.md"
    code = (
        "import sys\nfrom campaign.cli.entry import main\n"
        f"sys.argv = ['campaign', 'journal', {cid!r}, '--db', {str(db)!r}, '--out', {str(out)!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlmodel', 'sqlalchemy')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert out.exists() and "## Scoreboard" in out.read_text()
