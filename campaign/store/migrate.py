"""Schema migrations: an older campaign database is brought up to date when it is opened.

Why in place, in one transaction: a campaign record is the only copy of what a week of
node time measured.  Either the whole migration commits or the file is untouched, and a
migrated database reads exactly as before (same runs, verdicts and artifacts).

1 -> 2: per-level `runs` rows become one packed `run_sides` row per side and round;
long verdict details and artifacts are compressed; indexes for every query the loop
and the CLI make replace the single-column ones.

2 -> 3: the change sequence (`campaign.store.changes`): a table and the triggers that
stamp an experiment whenever a record its journal section shows is written.

3 -> 4: an experiment's scheduler-queue seconds are kept on its row beside its node
seconds (summed from its launches' `queue_seconds` artifacts, as `finish_experiment`
is given them), so the loop's running tally holds both; the kept tallies are counted
again from the records on their next read.  Idempotent, like every step: a file
migrated halfway (or by hand) ends the same.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import inspect, text
from sqlmodel import Session

from campaign.domain.models import LevelResult
from campaign.store.models import SCHEMA_VERSION, ArtifactRow, ExperimentRow, HypothesisRow, MetaRow, RunSideRow
from campaign.store.pack import PACK_TEXT_FROM, pack_levels, pack_text, unpack_text

__all__ = ["migrate"]


def _v1_to_v2(session: Session) -> None:
    conn = session.connection()
    RunSideRow.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]
    if inspect(conn).has_table("runs"):
        sides: dict[tuple[str, str, int], list[tuple[str, LevelResult, str]]] = defaultdict(list)
        info: dict[tuple[str, str, int], tuple[str, float]] = {}
        rows = conn.execute(
            text(
                "SELECT experiment_id, side, repeat, workload, metrics_json, prompt_set_hash, node, "
                "recorded_at FROM runs ORDER BY id"
            )
        )
        for exp_id, side, repeat, workload, metrics, prompt_hash, node, recorded_at in rows:
            key = (exp_id, side, int(repeat))
            sides[key].append((workload, LevelResult.model_validate_json(metrics), prompt_hash))
            info.setdefault(key, (node, recorded_at))
        for (exp_id, side, repeat), levels in sides.items():
            node, recorded_at = info[(exp_id, side, repeat)]
            session.add(
                RunSideRow(
                    experiment_id=exp_id,
                    side=side,
                    repeat=repeat,
                    levels=pack_levels(levels),
                    node=node,
                    recorded_at=recorded_at,
                )
            )
        session.flush()
        conn.execute(text("DROP TABLE runs"))
    _add_column(conn, "verdicts", "detail_z")
    _add_column(conn, "artifacts", "content_z")
    for table, column, packed_column, keys in (
        ("verdicts", "detail_json", "detail_z", "experiment_id"),
        ("artifacts", "content", "content_z", "experiment_id, kind, seq"),
    ):
        found = conn.execute(
            text(f"SELECT {keys}, {column} FROM {table} WHERE length({column}) >= {PACK_TEXT_FROM}")
        ).all()
        for *cols, plain in found:
            where = " AND ".join(f"{k.strip()} = :k{i}" for i, k in enumerate(keys.split(",")))
            conn.execute(
                text(f"UPDATE {table} SET {column} = '', {packed_column} = :z WHERE {where}"),
                {"z": pack_text(plain), **{f"k{i}": v for i, v in enumerate(cols)}},
            )
    conn.execute(text("DROP INDEX IF EXISTS ix_experiments_campaign_id"))
    for model in (ExperimentRow, HypothesisRow, ArtifactRow):
        for index in model.__table__.indexes:  # type: ignore[union-attr]
            index.create(conn, checkfirst=True)


def _add_column(conn: Any, table: str, column: str, kind: str = "BLOB") -> None:
    if column not in {c["name"] for c in inspect(conn).get_columns(table)}:
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))


def _v2_to_v3(session: Session) -> None:
    from campaign.store import changes

    changes.install(session.connection())


def _v3_to_v4(session: Session) -> None:
    conn = session.connection()
    _add_column(conn, "experiments", "queue_seconds", "FLOAT NOT NULL DEFAULT 0")
    queued: dict[str, float] = defaultdict(float)
    found = conn.execute(
        text(
            "SELECT a.experiment_id, a.content, a.content_z FROM artifacts a JOIN experiments e "
            "ON e.id = a.experiment_id WHERE a.kind = 'queue_seconds' AND e.status IN ('finished', 'failed') "
            "ORDER BY a.experiment_id, a.seq"
        )
    )
    for exp_id, plain, packed in found:
        queued[exp_id] += float(unpack_text(plain, packed))
    for exp_id, seconds in queued.items():
        conn.execute(
            text("UPDATE experiments SET queue_seconds = :q WHERE id = :id"), {"q": round(seconds, 3), "id": exp_id}
        )
    if inspect(conn).has_table("loop_tally"):
        _add_column(conn, "loop_tally", "queue_seconds", "FLOAT NOT NULL DEFAULT 0")
        conn.execute(text("DELETE FROM loop_tally"))  # counted again on the next read (campaign.store.tally)


_STEPS = {"1": ("2", _v1_to_v2), "2": ("3", _v2_to_v3), "3": ("4", _v3_to_v4)}


def migrate(session: Session, found: str) -> None:
    """Run every step from `found` to SCHEMA_VERSION inside the caller's write transaction."""
    version = found
    while version != str(SCHEMA_VERSION):
        nxt, step = _STEPS[version]
        step(session)
        version = nxt
    row = session.get(MetaRow, "schema_version")
    if row is None:
        row = MetaRow(key="schema_version", value=version)
    row.value = version
    session.add(row)
