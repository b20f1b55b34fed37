"""What a live view polls: a cheap version of the whole record, and the running
experiments' progress.

Why a version and not the views themselves: a browser asks every second whether
anything changed; answering from a few counts and maxima costs a millisecond at any
campaign size, and the page is rendered again only when the answer moves.  Plain
sqlite3 on a read-only connection (`campaign.store.quick.open_current`), like every
other read-only path, so a running campaign's writer is never blocked.
"""

from __future__ import annotations

import hashlib
import sqlite3

from pydantic import BaseModel

from campaign.store.plain import rows

__all__ = ["RunningExperiment", "record_version", "running_experiments"]

_VERSION_SQL = (
    "SELECT (SELECT count(*) FROM campaigns), (SELECT max(updated_at) FROM campaigns),"
    " (SELECT group_concat(status) FROM campaigns),"
    " (SELECT count(*) FROM experiments), (SELECT group_concat(status) FROM experiments WHERE status = 'running'),"
    " (SELECT max(finished_at) FROM experiments),"
    " (SELECT count(*) FROM verdicts), (SELECT count(*) FROM run_sides), (SELECT max(recorded_at) FROM run_sides),"
    " (SELECT count(*) FROM reviews), (SELECT max(id) FROM events)"
)


def record_version(conn: sqlite3.Connection) -> str:
    """Changes whenever anything a page shows can have changed (a campaign's status, an
    experiment started or finished, a round, a verdict, a review, an event)."""
    row = conn.execute(_VERSION_SQL).fetchone()
    return hashlib.sha256(repr(tuple(row)).encode()).hexdigest()[:16]


class RunningExperiment(BaseModel):
    """One experiment under way: the rounds recorded so far, per side."""

    id: str
    hypothesis: str
    attempt: int
    started_at: float
    rounds: dict[str, int]  # side -> rounds recorded
    last_recorded_at: float | None = None


def running_experiments(conn: sqlite3.Connection, campaign_id: str) -> list[RunningExperiment]:
    found = rows(
        conn,
        "SELECT e.id, e.hypothesis, e.attempt, e.started_at, rs.side, count(rs.side) AS n,"
        " max(rs.recorded_at) AS last FROM experiments e"
        " LEFT JOIN run_sides rs ON rs.experiment_id = e.id"
        " WHERE e.campaign_id = ? AND e.status = 'running'"
        " GROUP BY e.id, rs.side ORDER BY e.started_at, e.id",
        (campaign_id,),
    )
    out: dict[str, RunningExperiment] = {}
    for r in found:
        exp = out.setdefault(
            r.id,
            RunningExperiment(id=r.id, hypothesis=r.hypothesis, attempt=r.attempt, started_at=r.started_at, rounds={}),
        )
        if r.side is not None:
            exp.rounds[r.side] = r.n
            exp.last_recorded_at = max(exp.last_recorded_at or 0.0, r.last)
    return list(out.values())
