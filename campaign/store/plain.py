"""Reading the record with plain sqlite3: rows with attribute access, no ORM.

Why: every read that renders a view (the journal, `show`) goes through here, both from
the `Store` (inside its read transaction, on the session's own sqlite3 connection) and
from `campaign.store.reader` (a read-only command that must not import sqlmodel and
SQLAlchemy: half a second of a two-second journal render).  One read path, so the two
cannot drift apart.  A row is a named tuple whose fields are the table's column names,
which are the ORM attributes' names (`fingerprints.json` is selected as `json_`), so the
converters of `campaign.store.convert` read either kind.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from collections.abc import Collection
from functools import lru_cache
from typing import Any

from campaign.store.records import unknown_campaign

__all__ = ["IN_IDS", "ids_param", "require_campaign_row", "rows"]

#: `WHERE x IN` a list of any length, as one parameter (a JSON array): SQLite caps the
#: number of parameters, and a 5,000-experiment campaign passes 5,000 ids
IN_IDS = "IN (SELECT value FROM json_each(?))"


def ids_param(ids: Collection[str]) -> str:
    return json.dumps(list(ids))


@lru_cache(maxsize=64)
def _row_type(names: tuple[str, ...]) -> Any:
    return namedtuple("Row", names)  # the names come from the query


def rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Every row of `sql`, each a named tuple of its columns."""
    cur = conn.execute(sql, params)
    make = _row_type(tuple(d[0] for d in cur.description))._make
    return [make(r) for r in cur.fetchall()]


def require_campaign_row(conn: sqlite3.Connection, campaign_id: str) -> Any:
    found = rows(conn, "SELECT * FROM campaigns WHERE id = ?", (campaign_id,))
    if not found:
        raise unknown_campaign(campaign_id)
    return found[0]
