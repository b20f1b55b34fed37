"""Read-only answers that must be instant: `campaign status` at any campaign size.

Why plain sqlite3: importing sqlmodel/sqlalchemy alone costs more than the 0.3 s a
status line may take.  Only a database of the current schema version is read here;
any other (older: to be migrated; unknown: to be refused) returns None and the caller
opens the full `Store`, which migrates or names the fix.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_VERSION", "campaign_list", "open_current", "stale_journals"]

SCHEMA_VERSION = "4"  # campaign.store.models.SCHEMA_VERSION (checked by tests/campaign/store)


def open_current(
    path: Path | str, *, schema_version: str = SCHEMA_VERSION, timeout_s: float = 10.0
) -> sqlite3.Connection | None:
    """A read-only connection to `path` in autocommit mode (a caller that reads more than
    once takes its own `BEGIN`: one WAL snapshot), or None when the file is missing, not
    a database, or of another schema version (see the module doc).  A postgresql:// URL
    gets a PostgreSQL connection with the same `execute` (campaign.store.dialect)."""
    if "://" in str(path):
        return _open_postgres(str(path), schema_version, timeout_s)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and row[0] == schema_version:
            return conn
    except sqlite3.Error:
        pass
    conn.close()
    return None


def _open_postgres(url: str, schema_version: str, timeout_s: float) -> sqlite3.Connection | None:
    import psycopg

    from campaign.store.dialect import PgConn

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout_s)))
    except psycopg.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and row[0] == schema_version:
            return PgConn(conn)  # type: ignore[return-value]  # sqlite3's execute, see dialect.PgConn
    except psycopg.Error:
        pass
    conn.close()
    return None


def campaign_list(path: Path | str, *, busy_timeout_ms: int = 10_000) -> list[dict[str, Any]] | None:
    """Every campaign, newest first (id, name, status, halt_reason), or None (see module doc)."""
    conn = open_current(path, timeout_s=busy_timeout_ms / 1000)
    if conn is None:
        return None
    try:
        rows = conn.execute("SELECT id, name, status, halt_reason FROM campaigns ORDER BY created_at DESC").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return [{"id": i, "name": n, "status": s, "halt_reason": h} for i, n, s, h in rows]


def stale_journals(path: Path) -> set[str] | None:
    """Campaigns whose journal file is older than their record (a kill between a record
    write and its render), found without sqlmodel: the journal path is read from the
    playbook's YAML.  None when that cannot be told cheaply (the caller then checks all)."""
    import yaml

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute("SELECT id, playbook_path, overrides_json, updated_at FROM campaigns").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    stale: set[str] = set()
    for cid, playbook, overrides, updated in rows:
        if "journal" in (overrides or ""):
            return None  # an override may move the journal: let the full check decide
        try:
            with open(playbook, encoding="utf-8") as f:
                journal = (yaml.safe_load(f) or {}).get("journal")
        except (OSError, yaml.YAMLError, AttributeError):
            continue  # a moved playbook: `campaign journal` names the problem
        if not journal:
            return None
        try:
            if Path(journal).stat().st_mtime < float(updated):
                stale.add(cid)
        except OSError:
            if Path(journal).parent.is_dir():
                stale.add(cid)
    return stale
