"""The journal's cache of rendered parts, `<journal>.d/index.sqlite`: one row per experiment.

Why SQLite and not one JSON file: an update after a verdict must not read and write an
entry per experiment of the campaign (a whole-file index is the largest cost that grows
with the campaign: thousands of entries rewritten per verdict).  Rows are read by id (what the update touches), by
position (a scoreboard page, the main file's latest rows) or by having a dead-end row,
and written back only where they changed, in one transaction that commits with the
update.  A missing, unreadable or older index is started over: the journal is then
rendered in full, as for a new journal.  "Older" is any other version of the code that
draws a page or a plot (`VERSION`, a digest of its text, as `campaign.store.showcache`
salts `campaign show` with `view.py`): a digest changes with every edit, where a number
bumped by hand can be forgotten and an upgraded `campaign journal` would serve stale tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from campaign.domain.private import private_file

__all__ = ["FIELDS", "VERSION", "IndexDamaged", "JournalIndex", "code_version", "drawing_code"]


def drawing_code() -> list[Path]:
    """The files whose text decides what a page or a plot looks like: this package (its
    modules and templates), the view it draws from and the records it reads."""
    here = Path(__file__).parent
    core = here.parent
    return [
        *here.glob("*.py"),
        *(here / "templates").glob("*.j2"),
        core / "store" / "view.py",
        core / "store" / "latency.py",
        core / "domain" / "records.py",
    ]


def code_version(files: Iterable[Path]) -> str:
    """A digest of `files` (names and text); a build whose sources cannot be read gets
    one of its own every run, so its journals are always drawn in full, never stale."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: (p.parent.name, p.name)):  # not where it is installed
        try:
            h.update(f"{f.parent.name}/{f.name}".encode() + b"\0" + f.read_bytes() + b"\0")
        except OSError:
            return "unreadable-" + os.urandom(8).hex()
    return h.hexdigest()[:16]


VERSION = code_version(drawing_code())  # another version: an old journal is redrawn in full
FIELDS = ("key", "number", "body", "row", "plot", "dead", "in_main", "notes", "page_stat")
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, key TEXT NOT NULL, number INTEGER NOT NULL, "
    "body TEXT, row TEXT NOT NULL, plot TEXT, dead TEXT, in_main INTEGER, notes TEXT, page_stat TEXT)",
    "CREATE INDEX IF NOT EXISTS ix_entries_number ON entries (number)",
    "CREATE INDEX IF NOT EXISTS ix_entries_key ON entries (key)",
]


class JournalIndex:
    """Open (or start) the index at `path`; `close()` commits or, after an error, drops
    what this update wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = self._open(path)
        try:
            self.meta: dict[str, Any] = {k: json.loads(v) for k, v in self.db.execute("SELECT k, v FROM meta")}
        except ValueError:
            self.meta = {}
        if self.meta.get("version") != VERSION:
            self.clear()

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        for attempt in (0, 1):
            try:
                db = sqlite3.connect(private_file(path), isolation_level=None)
                db.execute("PRAGMA journal_mode=DELETE")
                db.execute("PRAGMA synchronous=OFF")  # a cache: a lost write is re-rendered from the record
                db.execute("BEGIN IMMEDIATE")
                for stmt in _SCHEMA:
                    db.execute(stmt)
                return db
            except sqlite3.DatabaseError:
                if attempt:
                    raise
                with contextlib.suppress(OSError):
                    path.unlink()  # not an index of ours (or damaged): start over
        raise AssertionError("unreachable")

    def clear(self) -> None:
        self.db.execute("DELETE FROM entries")
        self.db.execute("DELETE FROM meta")
        self.meta = {"version": VERSION}

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def id_at(self, number: int) -> str | None:
        row = self.db.execute("SELECT id FROM entries WHERE number = ?", (number,)).fetchone()
        return row[0] if row else None

    def get(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Entries by id (those present)."""
        wanted = list(ids)
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(f"SELECT id, {', '.join(FIELDS)} FROM entries WHERE id IN ({marks})", chunk):
                out[row[0]] = _entry(row[1:])
        return out

    def all(self) -> dict[str, dict[str, Any]]:
        return {row[0]: _entry(row[1:]) for row in self.db.execute(f"SELECT id, {', '.join(FIELDS)} FROM entries")}

    def key_taken(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone() is not None

    def rows(self, first: int, last: int) -> list[tuple[str, str, str]]:
        """(id, key, scoreboard row) of the experiments numbered first..last, in order."""
        return list(
            self.db.execute(
                "SELECT id, key, row FROM entries WHERE number BETWEEN ? AND ? ORDER BY number", (first, last)
            )
        )

    def dead_rows(self, latest: int | None = None) -> list[tuple[str, str, str]]:
        """(id, key, dead-end row) of every dead end (with `latest`: of the latest that
        many), in order."""
        if latest is None:
            return list(self.db.execute("SELECT id, key, dead FROM entries WHERE dead IS NOT NULL ORDER BY number"))
        rows = self.db.execute(
            "SELECT id, key, dead FROM entries WHERE dead IS NOT NULL ORDER BY number DESC LIMIT ?", (latest,)
        )
        return list(reversed(rows.fetchall()))

    def dead_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM entries WHERE dead IS NOT NULL").fetchone()[0])

    def put(self, entries: dict[str, dict[str, Any]]) -> None:
        cols = ", ".join(FIELDS)
        self.db.executemany(
            f"INSERT OR REPLACE INTO entries (id, {cols}) VALUES (?, {', '.join('?' * len(FIELDS))})",
            [(i, *(_column(f, e.get(f)) for f in FIELDS)) for i, e in entries.items()],
        )

    def close(self, *, commit: bool) -> None:
        try:
            if commit:
                self.db.execute("DELETE FROM meta")
                self.db.executemany(
                    "INSERT INTO meta (k, v) VALUES (?, ?)", [(k, json.dumps(v)) for k, v in self.meta.items()]
                )
                self.db.execute("COMMIT")
            else:
                with contextlib.suppress(sqlite3.Error):  # a damaged index: the caller starts it over
                    self.db.execute("ROLLBACK")
        finally:
            self.db.close()


def _column(field: str, value: Any) -> Any:
    if field == "page_stat":
        return None if value is None else json.dumps(value)
    if field == "in_main":
        return None if value is None else int(bool(value))
    return value


class IndexDamaged(sqlite3.DatabaseError):
    """A row this code did not write: the caller starts the index over."""


def _entry(values: tuple[Any, ...]) -> dict[str, Any]:
    e = dict(zip(FIELDS, values))
    if e["page_stat"] is not None:
        try:
            e["page_stat"] = json.loads(e["page_stat"])
        except ValueError:
            raise IndexDamaged(f"page_stat {e['page_stat']!r}") from None
    if e["in_main"] is not None:
        e["in_main"] = bool(e["in_main"])
    if e["body"] is None:
        del e["body"]
    return e
