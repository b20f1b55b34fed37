"""The checkpointers: SQLite's or PostgreSQL's, with a crash-test point after a task's
writes are saved.

The kill point is used only when `campaign.domain.killpoint` is asked for:
`<node>:writes` is the window where LangGraph holds a finished node's writes but not
yet the step's checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from campaign.domain import killpoint

__all__ = ["KillPointSaver", "node_of", "postgres_saver"]


def node_of(task_path: str) -> str:
    """The node name of a pull task's path ("~__pregel_pull, record" -> "record")."""
    parts = task_path.lstrip("~").split(", ")
    return parts[1] if len(parts) >= 2 and parts[0] == "__pregel_pull" else ""


class _KillPoint:
    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        name = node_of(task_path)
        if name:
            killpoint.reached(f"{name}:writes")


class KillPointSaver(_KillPoint, SqliteSaver):
    pass


@contextmanager
def postgres_saver(url: str, *, kill_points: bool = False) -> Iterator[Any]:
    """A PostgresSaver in the database at `url` (no password in it: libpq reads PGPASSWORD
    or the .pgpass), its tables created or migrated (`setup`, idempotent)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    from campaign.store.db import SCHEMA_LOCK_KEY

    class KillPointPostgresSaver(_KillPoint, PostgresSaver):
        pass

    saver_cls = KillPointPostgresSaver if kill_points else PostgresSaver
    conninfo = "postgresql://" + url.partition("://")[2]  # libpq's scheme (the store's may name the driver)
    with Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = saver_cls(conn)
        conn.execute(f"SELECT pg_advisory_lock({SCHEMA_LOCK_KEY})")  # two controllers on a new database:
        try:  # the tables are created once
            saver.setup()
        finally:
            conn.execute(f"SELECT pg_advisory_unlock({SCHEMA_LOCK_KEY})")
        yield saver
