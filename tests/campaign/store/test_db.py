"""The database file itself: WAL, schema version, bad paths, readers beside a writer."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.store import Store
from campaign.store.db import write_session
from campaign.store.models import SCHEMA_VERSION, CampaignRow

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}


def test_new_database_is_in_wal_mode_with_schema_version(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "dir" / "campaign.db"
    Store(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"campaigns", "hypotheses", "experiments", "run_sides", "verdicts", "fingerprints", "artifacts",
            "reviews", "llm_calls", "events", "run_locks"} <= tables  # fmt: skip


def test_reopening_keeps_the_data(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        cid = store.create_campaign("demo", playbook=PLAYBOOK).id
    with Store(db) as store:
        assert store.get_campaign(cid).name == "demo"


def test_other_schema_version_is_refused_with_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value='0' WHERE key='schema_version'")
    with pytest.raises(UserError) as err:
        Store(db)
    msg = str(err.value)
    assert f"database schema version 0, this campaign expects {SCHEMA_VERSION}" in msg
    assert str(db) in msg and "fix:" in msg


def test_a_database_of_another_tool_gets_our_tables_beside_its_own(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT)")
    with Store(db) as store:
        assert store.list_campaigns() == []


def test_path_below_a_regular_file_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create the database directory"):
        Store(blocker / "c.db")


def test_directory_path_and_garbage_file_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        Store(tmp_path)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 200)
    with pytest.raises(UserError, match="cannot open the database"):
        Store(garbage)


def test_reader_in_another_store_is_not_blocked_by_an_open_write_transaction(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    writer = Store(db)
    cid = writer.create_campaign("demo", playbook=PLAYBOOK).id
    reader = Store(db, busy_timeout_ms=100)
    with write_session(writer._engine) as s:  # the writer holds the write lock with a pending change
        row = s.get(CampaignRow, cid)
        assert row is not None
        row.status = "failed"
        s.add(row)
        s.flush()
        t0 = time.monotonic()
        assert reader.get_campaign(cid).status == "running"  # the last committed state
        assert reader.view(cid).status == "running"
        assert time.monotonic() - t0 < 1.0
    assert reader.get_campaign(cid).status == "failed"


def test_reader_in_another_process_reads_while_the_writer_holds_a_transaction(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        cid = store.create_campaign("demo", playbook=PLAYBOOK).id
    child = textwrap.dedent(
        f"""
        import sys
        from campaign.store import Store
        from campaign.store.db import write_session
        from campaign.store.models import CampaignRow
        store = Store({str(db)!r})
        with write_session(store._engine) as s:
            row = s.get(CampaignRow, {cid!r}); row.halt_reason = "held"; s.add(row); s.flush()
            print("holding", flush=True)
            sys.stdin.read()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        with Store(db, busy_timeout_ms=100) as reader:
            t0 = time.monotonic()
            assert reader.show_json(cid)["status"] == "running"
            assert reader.get_campaign(cid).halt_reason is None
            assert time.monotonic() - t0 < 2.0
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    with Store(db) as store:
        assert store.get_campaign(cid).halt_reason == "held"


def test_writer_is_not_blocked_by_a_long_read_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    reader, writer = Store(db), Store(db, busy_timeout_ms=200)
    cid = writer.create_campaign("demo", playbook=PLAYBOOK).id
    from campaign.store.db import read_session

    with read_session(reader._engine) as s:
        assert s.get(CampaignRow, cid) is not None  # snapshot taken
        writer.update_campaign(cid, status="finished")
        assert s.get(CampaignRow, cid).status == "running"  # type: ignore[union-attr]  # snapshot isolation
    assert reader.get_campaign(cid).status == "finished"


def test_concurrent_writers_in_threads_queue_instead_of_failing(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK).id
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(20):
                store.add_event(cid, "note", f"thread {n} event {i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.events(cid, "note")) == 80
