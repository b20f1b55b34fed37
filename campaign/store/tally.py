"""The loop's running counts per campaign, kept in step with the records they count.

Why: after every verdict `record` needs the budget's count, the review policy's streaks
and the node and scheduler-queue hours; counting them from the records reads every experiment, so each
experiment cost more than the one before and a campaign's cost grew with its square.
The counts change only when an experiment becomes final, a review gate is approved or
the environment changes, and each of those writes updates this campaign's `loop_tally`
row in its own transaction: a kill -9 leaves records and counts consistent, and a write
that a resumed node repeats (a no-op on the records) changes nothing.  A campaign with
no row yet (a database written before this table) is counted from its records once.
`recount` is that count from scratch; a test holds the two equal.

Plain SQL on the session's connection, like `campaign.store.changes` (both databases:
campaign.store.dialect).
"""

from __future__ import annotations

import sqlite3

from campaign.ports.records import Tally

__all__ = ["DDL", "Tally", "current", "ensure", "on_finish", "on_late_verdict", "on_reset", "read", "recount"]

DDL = (
    "CREATE TABLE IF NOT EXISTS loop_tally (campaign_id TEXT PRIMARY KEY, experiments_done INTEGER NOT NULL, "
    "no_win INTEGER NOT NULL, dead_end INTEGER NOT NULL, node_seconds REAL NOT NULL, "
    "queue_seconds REAL NOT NULL DEFAULT 0)"
)
_FIELDS = "experiments_done, no_win, dead_end, node_seconds, queue_seconds"
_RESETS = """
SELECT coalesce(max(t), 0) FROM (
  SELECT max(coalesce(decided_at, 0)) AS t FROM reviews
   WHERE campaign_id = :c AND key LIKE 'review#%' AND decision = 'approve'
  UNION ALL SELECT max(ts) FROM events WHERE campaign_id = :c AND kind = 'environment') AS resets
"""
_SINCE = """
SELECT v.kind FROM experiments e LEFT JOIN verdicts v ON v.experiment_id = e.id
WHERE e.campaign_id = :c AND e.role = 'candidate' AND e.status IN ('finished', 'failed')
  AND coalesce(e.finished_at, 0) > :since
ORDER BY coalesce(e.finished_at, 0), e.started_at, e.id
"""


def recount(conn: sqlite3.Connection, campaign_id: str) -> Tally:
    """The counts from the records alone (what the row must always equal)."""
    done, seconds, queued = conn.execute(
        "SELECT coalesce(sum(CASE WHEN role = 'candidate' AND status IN ('finished', 'failed') THEN 1 ELSE 0 END), 0), "
        "coalesce(sum(node_seconds), 0), coalesce(sum(queue_seconds), 0) FROM experiments WHERE campaign_id = ?",
        (campaign_id,),
    ).fetchone()
    since = conn.execute(_RESETS, {"c": campaign_id}).fetchone()[0]
    no_win = dead_end = 0
    for (kind,) in conn.execute(_SINCE, {"c": campaign_id, "since": since}):
        if kind is None:
            continue
        no_win, dead_end = (0, 0) if kind == "win" else (no_win + 1, dead_end + (kind == "dead_end"))
    return Tally(experiments_done=done, no_win=no_win, dead_end=dead_end, node_seconds=seconds, queue_seconds=queued)


def _row(conn: sqlite3.Connection, campaign_id: str) -> Tally | None:
    try:
        found = conn.execute(f"SELECT {_FIELDS} FROM loop_tally WHERE campaign_id = ?", (campaign_id,)).fetchone()
    except sqlite3.OperationalError:  # no table yet: nothing counted
        return None
    return Tally(**dict(zip(_FIELDS.split(", "), found, strict=True))) if found else None


def _write(conn: sqlite3.Connection, campaign_id: str, t: Tally) -> None:
    conn.execute(DDL)
    conn.execute(
        f"INSERT INTO loop_tally (campaign_id, {_FIELDS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (campaign_id) "
        "DO UPDATE SET " + ", ".join(f"{f} = EXCLUDED.{f}" for f in _FIELDS.split(", ")),
        (campaign_id, t.experiments_done, t.no_win, t.dead_end, t.node_seconds, t.queue_seconds),
    )


def read(conn: sqlite3.Connection, campaign_id: str) -> Tally | None:
    """The kept counts, or None when this campaign has none yet (`Store.loop_tally` then
    counts and keeps them)."""
    return _row(conn, campaign_id)


def current(conn: sqlite3.Connection, campaign_id: str) -> Tally:
    """The kept counts, or (none kept yet) the same counted from the records: for a reader,
    which writes nothing.  The one read of a campaign's node and queue seconds."""
    return _row(conn, campaign_id) or recount(conn, campaign_id)


def ensure(conn: sqlite3.Connection, campaign_id: str) -> Tally:
    """The kept counts, counted from the records and kept when missing (in a write
    transaction)."""
    t = _row(conn, campaign_id)
    if t is None:
        t = recount(conn, campaign_id)
        _write(conn, campaign_id, t)
    return t


def on_finish(conn: sqlite3.Connection, experiment_id: str) -> None:
    """An experiment has just become final (in this transaction, written before the call)."""
    campaign_id, role, status, seconds, queued = conn.execute(
        "SELECT campaign_id, role, status, node_seconds, queue_seconds FROM experiments WHERE id = ?", (experiment_id,)
    ).fetchone()
    t = _row(conn, campaign_id)
    if t is None:  # counted from the records, this experiment included
        ensure(conn, campaign_id)
        return
    t.node_seconds += seconds or 0.0
    t.queue_seconds += queued or 0.0
    if role == "candidate" and status in ("finished", "failed"):
        t.experiments_done += 1
        found = conn.execute("SELECT kind FROM verdicts WHERE experiment_id = ?", (experiment_id,)).fetchone()
        if found is not None:
            win = found[0] == "win"
            t.no_win, t.dead_end = (0, 0) if win else (t.no_win + 1, t.dead_end + (found[0] == "dead_end"))
    _write(conn, campaign_id, t)


def on_reset(conn: sqlite3.Connection, campaign_id: str) -> None:
    """A review gate was approved or the environment changed: the streaks start again."""
    t = _row(conn, campaign_id)
    if t is None:
        ensure(conn, campaign_id)
        return
    _write(conn, campaign_id, t.model_copy(update={"no_win": 0, "dead_end": 0}))


def on_late_verdict(conn: sqlite3.Connection, campaign_id: str) -> None:
    """A verdict for an experiment already final (not the loop's order, which decides
    first): where it falls among the streaks depends on when it finished, so count again."""
    if _row(conn, campaign_id) is not None:
        _write(conn, campaign_id, recount(conn, campaign_id))
