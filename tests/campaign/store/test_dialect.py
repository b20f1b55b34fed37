"""The plain readers' SQL on PostgreSQL (campaign.store.dialect), and the PostgreSQL
tests' own rule: skipped with the reason on a developer's machine, failed in CI."""

from __future__ import annotations

import pytest

from campaign.store.dialect import PgConn, translate
from tests.pgdb import fresh_database, server_url


def test_placeholders_become_psycopgs_and_literals_keep_their_text() -> None:
    sql = "SELECT 'a%:b?' FROM t WHERE k LIKE 'r#%' AND x = ? AND y = :c AND z::text IS ?"
    assert translate(sql) == (
        "SELECT 'a%%:b?' FROM t WHERE k LIKE 'r#%%' AND x = %s AND y = %(c)s AND z::text IS NOT DISTINCT FROM %s"
    )
    assert translate("SELECT group_concat(status) FROM e") == "SELECT string_agg(CAST(status AS text), ',') FROM e"


def test_the_translated_sql_runs_on_postgresql() -> None:
    import psycopg

    with fresh_database() as url, psycopg.connect(url, autocommit=True) as raw:
        conn = PgConn(raw)
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n REAL, b BLOB)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [("review#1", 0.1, b"\x00"), ("x%", None, b"")])
        assert conn.execute("SELECT k FROM t WHERE k LIKE 'review#%' AND n IS ?", (0.1,)).fetchall() == [("review#1",)]
        assert conn.execute(
            "SELECT k FROM t WHERE k IN (SELECT value FROM json_each(?)) AND n IS ?", ('["x%", "y"]', None)
        ).fetchall() == [("x%",)]
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 't'").fetchone() == (1,)


def test_without_a_server_a_developer_skips_and_ci_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPAIGN_TEST_DATABASE_URL", raising=False)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL"):
        server_url()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run this test, but: no PostgreSQL"):
        server_url()


def test_processes_opening_a_new_database_at_once_create_the_schema_once() -> None:
    """SQLite's BEGIN IMMEDIATE queues the creators; on PostgreSQL an advisory lock does
    (without it two of four openers failed on a duplicate type, every time)."""
    import threading

    from campaign.store import Store

    with fresh_database() as url:
        errors: list[str] = []
        start = threading.Barrier(4)

        def open_it() -> None:
            start.wait()
            try:
                Store(url).close()
            except Exception as exc:  # the assertion below shows it
                errors.append(str(exc))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
