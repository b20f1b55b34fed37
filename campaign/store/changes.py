"""A change sequence in the database: which experiments' journal sections changed since a
given point, at the cost of what changed.

Why: a journal update at experiment 5,000 must cost what it costs at experiment 10, so
it may not look at 5,000 experiments to find the one that changed (a digest per
experiment was the largest part of an update that grew with the campaign).  Triggers
(SQLite's, or plpgsql on PostgreSQL) write the change, so no code path that writes a record can forget it: every
insert or update of a record that an experiment's section shows (the experiment row, a
run side, the verdict, an artifact, the hypothesis spec) stamps the experiment with the
next number of one global sequence.  `journal_changes` keeps one row per experiment
(its latest number), so it grows with the campaign, not with its writes.

A reader keeps the highest number it has seen; `changed_since` returns the experiments
stamped after it.  A number lower than the reader's (a database restored from an older
copy) shows in `latest`, and the reader then starts over.

On PostgreSQL the trigger locks `journal_changes` before taking the next number, so
numbers are handed out in commit order (a sequence would let a reader see 10 committed
before 9 and miss 9 for good).
"""

from __future__ import annotations

from typing import Any

from campaign.store.plain import require_campaign_row

__all__ = ["DDL", "candidate_order", "changed_since", "install", "journal_changes", "latest"]

_BUMP = (
    "INSERT OR REPLACE INTO journal_changes (experiment_id, campaign_id, seq) "
    "SELECT e.id, e.campaign_id, (SELECT coalesce(max(seq), 0) + 1 FROM journal_changes) "
    "FROM experiments e WHERE {where};"
)

_TRIGGERS = {
    "jc_experiment_insert": ("AFTER INSERT ON experiments", "e.id = NEW.id"),
    "jc_experiment_update": ("AFTER UPDATE ON experiments", "e.id = NEW.id"),
    "jc_run_side_insert": ("AFTER INSERT ON run_sides", "e.id = NEW.experiment_id"),
    "jc_run_side_update": ("AFTER UPDATE ON run_sides", "e.id = NEW.experiment_id"),
    "jc_verdict_insert": ("AFTER INSERT ON verdicts", "e.id = NEW.experiment_id"),
    "jc_verdict_update": ("AFTER UPDATE ON verdicts", "e.id = NEW.experiment_id"),
    "jc_artifact_insert": ("AFTER INSERT ON artifacts", "e.id = NEW.experiment_id"),
    "jc_artifact_update": ("AFTER UPDATE ON artifacts", "e.id = NEW.experiment_id"),
    "jc_hypothesis_insert": (
        "AFTER INSERT ON hypotheses",
        "e.campaign_id = NEW.campaign_id AND e.hypothesis = NEW.name",
    ),
    "jc_hypothesis_update": (
        "AFTER UPDATE OF spec_json, source ON hypotheses",
        "e.campaign_id = NEW.campaign_id AND e.hypothesis = NEW.name",
    ),
}

DDL = [
    "CREATE TABLE IF NOT EXISTS journal_changes (experiment_id TEXT PRIMARY KEY, "
    "campaign_id TEXT NOT NULL, seq INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ix_journal_changes_campaign ON journal_changes (campaign_id, seq)",
    "CREATE INDEX IF NOT EXISTS ix_journal_changes_seq ON journal_changes (seq)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS {name} {when} BEGIN {_BUMP.format(where=where)} END"
        for name, (when, where) in _TRIGGERS.items()
    ),
]


_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION jc_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  LOCK TABLE journal_changes IN SHARE ROW EXCLUSIVE MODE;
  IF TG_ARGV[0] = 'hypothesis' THEN
    INSERT INTO journal_changes (experiment_id, campaign_id, seq)
    SELECT e.id, e.campaign_id, (SELECT coalesce(max(seq), 0) + 1 FROM journal_changes)
    FROM experiments e WHERE e.campaign_id = NEW.campaign_id AND e.hypothesis = NEW.name
    ON CONFLICT (experiment_id) DO UPDATE SET campaign_id = EXCLUDED.campaign_id, seq = EXCLUDED.seq;
  ELSE
    INSERT INTO journal_changes (experiment_id, campaign_id, seq)
    SELECT e.id, e.campaign_id, (SELECT coalesce(max(seq), 0) + 1 FROM journal_changes)
    FROM experiments e WHERE e.id = to_jsonb(NEW) ->> TG_ARGV[0]
    ON CONFLICT (experiment_id) DO UPDATE SET campaign_id = EXCLUDED.campaign_id, seq = EXCLUDED.seq;
  END IF;
  RETURN NULL;
END $$
"""


def _pg_ddl() -> list[str]:
    out = [DDL[0], DDL[1], DDL[2], _PG_FUNCTION]
    for name, (when, where) in _TRIGGERS.items():
        arg = "hypothesis" if "NEW.name" in where else where.rpartition("NEW.")[2]
        out.append(f"CREATE OR REPLACE TRIGGER {name} {when} FOR EACH ROW EXECUTE FUNCTION jc_bump('{arg}')")
    return out


def install(conn: Any) -> None:
    """Create the table and its triggers (a new database, or a migration: then every
    existing experiment is stamped once, so a reader that starts from 0 sees them all).
    `conn`: a SQLAlchemy connection (the readers below take the sqlite3 connection)."""
    for stmt in _pg_ddl() if conn.dialect.name == "postgresql" else DDL:
        conn.exec_driver_sql(stmt)
    conn.exec_driver_sql(
        "INSERT INTO journal_changes (experiment_id, campaign_id, seq) "
        "SELECT id, campaign_id, 1 FROM experiments WHERE true ON CONFLICT DO NOTHING"
    )  # WHERE: SQLite parses the upsert after it


def latest(conn: Any) -> int:
    """The highest number stamped so far (0 in a database without changes).  `conn` here
    and below: a sqlite3 connection (campaign.store.plain), inside the reader's transaction."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal_changes").fetchone()[0])


def changed_since(conn: Any, campaign_id: str, seq: int) -> set[str]:
    """The campaign's experiments stamped after `seq` (an index range: only those rows)."""
    rows = conn.execute(
        "SELECT experiment_id FROM journal_changes WHERE campaign_id = ? AND seq > ?", (campaign_id, seq)
    )
    return {r[0] for r in rows}


def candidate_order(conn: Any, campaign_id: str) -> list[str]:
    """The campaign's candidate experiments in start order (the journal's numbering): one
    column from the order index, no record decoded."""
    rows = conn.execute(
        "SELECT id FROM experiments WHERE campaign_id = ? AND role = 'candidate' ORDER BY started_at, id",
        (campaign_id,),
    ).fetchall()
    return [r[0] for r in rows]


def journal_changes(conn: Any, campaign_id: str, since: int | None) -> tuple[list[str], set[str] | None, int]:
    """(candidate ids in start order, the experiments changed after `since`, the latest
    change number), inside one read transaction.  Changed is None when `since` is None or
    ahead of the database (restored from an older copy): the reader must take everything
    as changed."""
    require_campaign_row(conn, campaign_id)
    seq = latest(conn)
    changed = changed_since(conn, campaign_id, since) if since is not None and since <= seq else None
    return candidate_order(conn, campaign_id), changed, seq
