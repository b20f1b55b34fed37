"""The plain readers' SQL on PostgreSQL: one SQL text for both databases.

Why a translation and not two copies of each query: the plain readers
(campaign.store.plain and the modules on it) take sqlite3's `execute(sql, params)`
with `?` and `:name` placeholders, and most of their SQL is standard.  What differs is
rewritten here, in one place: psycopg's placeholders, `json_each` (a list of ids as
one parameter), `group_concat`, BLOB and REAL, `IS ?`, a reader's `BEGIN`, and the table catalogue.  Everything else is written
to run on both (ON CONFLICT upserts, CASE instead of summed booleans, TRUE/FALSE).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

__all__ = ["PgConn", "translate"]

_TOKEN = re.compile(r"'(?:[^']|'')*'|%|\?|(?<![:\w]):([A-Za-z_]\w*)")
_REWRITES = (
    (re.compile(r"json_each\(\?\)"), "json_array_elements_text(CAST(? AS json))"),
    (re.compile(r"group_concat\(([^()]*)\)"), r"string_agg(CAST(\1 AS text), ',')"),
    (
        re.compile(r"sqlite_master WHERE type = 'table' AND name ="),
        "pg_tables WHERE schemaname = current_schema() AND tablename =",
    ),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),  # PostgreSQL's REAL is 4 bytes
    (re.compile(r"\bIS \?"), "IS NOT DISTINCT FROM ?"),  # SQLite's null-safe equality
    (re.compile(r"^BEGIN$"), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),  # a reader's snapshot
)


@lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """SQLite-flavoured SQL as psycopg takes it (placeholders `%s` / `%(name)s`, `%`
    doubled, the rewrites above)."""
    for pattern, repl in _REWRITES:
        sql = pattern.sub(repl, sql)

    def token(m: re.Match[str]) -> str:
        text = m.group(0)
        if text.startswith("'"):
            return text.replace("%", "%%")
        if text == "%":
            return "%%"
        if text == "?":
            return "%s"
        return f"%({m.group(1)})s"

    return _TOKEN.sub(token, sql)


class PgConn:
    """A psycopg connection with sqlite3's `execute` (the SQL translated)."""

    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        # params always passed (an empty tuple too): psycopg then reads `%%` as `%`
        return self._conn.execute(translate(sql), params if isinstance(params, dict) else tuple(params))

    def close(self) -> None:
        self._conn.close()

    def executemany(self, sql: str, seq: Any) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(translate(sql), seq)
