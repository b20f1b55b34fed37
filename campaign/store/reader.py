"""What `campaign journal` reads, with plain sqlite3: the `Store`'s read side without
sqlmodel and SQLAlchemy.

Why: importing them is half a second, a quarter of the full journal render of a
1,000-experiment campaign (issue 16's target is 2 s).  The reads are the `Store`'s own
(`campaign.store.snapshot`, `campaign.store.changes`: the same functions, on this
connection instead of the session's), so the journal is the same either way.

Only a database of the current schema version is read here: `open_reader` returns None
for any other (older: to be migrated; unknown: to be refused) or an unreadable file, and
the caller opens the full `Store`, which migrates or names the fix.  Each call is one
read transaction (a WAL snapshot): a running campaign's writer is never blocked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from campaign.domain.records import CampaignView
from campaign.store import changes
from campaign.store.convert import campaign_record
from campaign.store.memo import ParseMemo
from campaign.store.plain import require_campaign_row
from campaign.store.progress import RunningExperiment, record_version, running_experiments
from campaign.store.quick import open_current
from campaign.store.records import CampaignRecord
from campaign.store.snapshot import read_snapshot
from campaign.store.view import build_view

__all__ = ["ReadOnlyStore", "open_reader"]


class ReadOnlyStore:
    """`get_campaign`, `journal_changes` and `view`, as `campaign.store.Store` has them;
    `version` and `running` for the live web view."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._memo = ParseMemo()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            self._conn.execute("ROLLBACK")  # nothing was written: the snapshot ends

    def get_campaign(self, campaign_id: str) -> CampaignRecord:
        with self._snapshot() as conn:
            return campaign_record(require_campaign_row(conn, campaign_id))

    def journal_changes(self, campaign_id: str, since: int | None) -> tuple[list[str], set[str] | None, int]:
        with self._snapshot() as conn:
            return changes.journal_changes(conn, campaign_id, since)

    def view(
        self, campaign_id: str, *, detail: set[str] | None = None, window: Collection[str] | None = None
    ) -> CampaignView:
        with self._snapshot() as conn:
            snap = read_snapshot(conn, campaign_id, detail, window=window, memo=self._memo)
        return build_view(snap, self._memo.baseline_views if detail is not None else None)

    def version(self) -> str:
        """`campaign.store.progress.record_version`: what a live page polls."""
        return record_version(self._conn)

    def running(self, campaign_id: str) -> list[RunningExperiment]:
        with self._snapshot() as conn:
            return running_experiments(conn, campaign_id)


def open_reader(path: Path | str, *, busy_timeout_ms: int = 10_000) -> ReadOnlyStore | None:
    """A reader on `path`, or None (see the module docstring): the caller opens a `Store`."""
    conn = open_current(path, timeout_s=busy_timeout_ms / 1000)
    return None if conn is None else ReadOnlyStore(conn)
