"""`campaign show --json` from stored text: each experiment's JSON is written once and reused.

Why: at 5,000 experiments, rebuilding every experiment's view (decoding its runs and its
verdict) costs seconds, while the text itself is immutable once the records it shows
are (a finished experiment's runs and verdict never change, see campaign.store.experiments).
Each cached piece is keyed by a digest of exactly what it shows, computed in SQL from
row timestamps and counts (nothing is decoded):

- an experiment: its own row, its verdict, its runs, its patch, and the status and runs
  of the baseline whose figures it borrows when it has no interleaved baseline of its own;
- the head (name, status, baseline figures, the configuration to deploy, wins not adopted,
  planner calls and notes): the campaign row, every baseline measurement, every WIN with
  its adoption, the model calls and the planner notes.

Every digest is salted with the text of `view.py`, `latency.py`, `deploy.py` and
`verdict/explain.py` (the code that builds the document) and the playbook, so a new
release or another metric never serves old text.  A piece whose
digest differs is rebuilt by the full path (campaign.store.show) and written back.

This module imports only sqlite3/zlib: the console script (campaign.cli.entry) answers a
fully cached `show --json` from here without loading sqlmodel.  The cache is not a record:
dropping the table loses nothing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DDL",
    "HEAD",
    "SEQ_DDL",
    "cached_pieces",
    "digests",
    "load",
    "pieces",
    "quick_show",
    "refresh_scope",
    "store_rows",
]

DDL = (
    "CREATE TABLE IF NOT EXISTS show_cache (campaign_id TEXT NOT NULL, key TEXT NOT NULL, "
    "digest TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (campaign_id, key))"
)
HEAD = ""  # the key of the head piece (experiment ids are never empty)
TAIL_EMPTY = "]\n}"
TAIL = "\n  ]\n}"

_EXPERIMENTS = """
SELECT e.id, e.*, v.recorded_at, v.kind, v.reason,
       (SELECT count(*) || ':' || coalesce(CAST(max(r.recorded_at) AS TEXT), '') FROM run_sides r WHERE r.experiment_id = e.id),
       (SELECT count(*) || ':' || coalesce(CAST(max(a.seq) AS TEXT), '') FROM artifacts a
         WHERE a.experiment_id = e.id AND a.kind = 'patch'),
       ref.status,
       (SELECT count(*) || ':' || coalesce(CAST(max(r.recorded_at) AS TEXT), '') FROM run_sides r
         WHERE r.experiment_id = e.baseline_ref AND r.side = 'baseline')
FROM experiments e
LEFT JOIN verdicts v ON v.experiment_id = e.id
LEFT JOIN experiments ref ON ref.id = e.baseline_ref
WHERE e.campaign_id = ? AND e.role = 'candidate'
ORDER BY e.started_at, e.id
"""
_CAMPAIGN = "SELECT name, status, halt_reason, baseline_experiment_id, playbook_json FROM campaigns WHERE id = ?"
_BASELINES = """
SELECT e.id, e.status, e.finished_at, e.started_at, e.config_json,
       (SELECT count(*) || ':' || coalesce(CAST(max(r.recorded_at) AS TEXT), '') FROM run_sides r WHERE r.experiment_id = e.id)
FROM experiments e WHERE e.campaign_id = ? AND e.role = 'baseline' ORDER BY e.started_at, e.id
"""
_ADOPTION = """
SELECT count(*), group_concat(e.id || ':' || e.adopted || ':' || e.status) FROM experiments e
JOIN verdicts v ON v.experiment_id = e.id WHERE e.campaign_id = ? AND e.role = 'candidate' AND v.kind = 'win'
"""
_PLANNER = """
SELECT (SELECT count(*) || ':' || coalesce(CAST(max(id) AS TEXT), '') FROM llm_calls WHERE campaign_id = ?),
       (SELECT count(*) || ':' || coalesce(CAST(max(id) AS TEXT), '') FROM events WHERE campaign_id = ? AND kind = 'planner')
"""


def _code_salt() -> bytes:
    try:  # the document's code: the view, latency, the configuration to deploy, the verdict's explanation
        here = Path(__file__)
        return (
            here.with_name("view.py").read_bytes()
            + here.with_name("latency.py").read_bytes()
            + here.with_name("deploy.py").read_bytes()
            + (here.parent.parent / "verdict" / "explain.py").read_bytes()
        )
    except OSError:  # a build without sources: never serve cached text
        return repr(id(object())).encode()


def _sha(*parts: Any) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:20]


def digests(conn: Any, campaign_id: str, only: list[str] | None = None) -> dict[str, str] | None:
    """Key -> digest of the head (`HEAD`) and of every candidate experiment (with `only`:
    of those), in document order; None for an unknown campaign.  `conn` is a sqlite3
    connection (or anything with the same `execute`) inside the read transaction the
    text is served from."""
    row = conn.execute(_CAMPAIGN, (campaign_id,)).fetchone()
    if row is None:
        return None
    salt = _sha(_code_salt(), tuple(row[4:]))
    out = {
        HEAD: _sha(
            salt,
            tuple(row[:4]),
            [tuple(b) for b in conn.execute(_BASELINES, (campaign_id,))],
            tuple(conn.execute(_PLANNER, (campaign_id, campaign_id)).fetchone()),
            tuple(conn.execute(_ADOPTION, (campaign_id,)).fetchone()),
        )
    }
    query, params = _EXPERIMENTS, [campaign_id]
    if only is not None:
        query = query.replace("AND e.role = 'candidate'", f"AND e.role = 'candidate' AND e.id IN ({_marks(only)})")
        params = [campaign_id, *only]
    for exp in conn.execute(query, tuple(params)):
        out[exp[0]] = _sha(salt, tuple(exp))
    return out


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values)) or "NULL"


SEQ_DDL = "CREATE TABLE IF NOT EXISTS show_cache_seq (campaign_id TEXT PRIMARY KEY, seq INTEGER NOT NULL)"


def refresh_scope(conn: Any, campaign_id: str, latest: int, changed_since: Any) -> list[str] | None:
    """The candidates whose pieces may have changed since the last refresh stored its
    change number (`campaign.store.changes`): those written since, and those borrowing
    a baseline written since.  None: look at every piece (no number stored yet, or one
    ahead of the database)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'show_cache_seq'").fetchone() is None:
        return None
    row = conn.execute("SELECT seq FROM show_cache_seq WHERE campaign_id = ?", (campaign_id,)).fetchone()
    if row is None or row[0] > latest:
        return None
    written = sorted(changed_since(row[0]))
    if not written:
        return []
    marks = _marks(written)
    rows = conn.execute(
        f"SELECT id FROM experiments WHERE campaign_id = ? AND role = 'candidate' "
        f"AND (id IN ({marks}) OR baseline_ref IN ({marks}))",
        (campaign_id, *written, *written),
    )
    return [r[0] for r in rows]


def load(conn: Any, campaign_id: str, wanted: dict[str, str], *, bodies: bool = True) -> dict[str, str]:
    """The cached text of every key whose stored digest is the wanted one (without
    `bodies`: the keys, each with an empty text, for a caller that only stores what is missing)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'show_cache'").fetchone() is None:
        return {}  # written by the first `show --json` or the loop's first verdict
    if not bodies:
        keys = list(wanted)
        rows = (
            conn.execute(
                f"SELECT key, digest FROM show_cache WHERE campaign_id = ? AND key IN ({_marks(keys)})",
                (campaign_id, *keys),
            )
            if len(keys) <= 500
            else conn.execute("SELECT key, digest FROM show_cache WHERE campaign_id = ?", (campaign_id,))
        )
        return {k: "" for k, d in rows if wanted.get(k) == d}
    rows = conn.execute("SELECT key, digest, body FROM show_cache WHERE campaign_id = ?", (campaign_id,))
    return {k: zlib.decompress(body).decode() for k, d, body in rows if wanted.get(k) == d}


def pieces(head: str, items: Iterable[str]) -> Iterator[str]:
    """The document from its head (text up to the experiments' `[`) and each experiment's
    indented text: what `json.dumps(show_json, indent=2)` prints."""
    yield head
    n = -1
    for n, item in enumerate(items):
        yield ("," if n else "") + "\n" + item
    yield TAIL if n >= 0 else TAIL_EMPTY


def cached_pieces(conn: Any, campaign_id: str) -> Iterator[str] | None:
    """The whole document when every piece is cached and current, else None."""
    wanted = digests(conn, campaign_id)
    if wanted is None:
        return None
    found = load(conn, campaign_id, wanted)
    if len(found) != len(wanted):
        return None
    return pieces(found[HEAD], (found[k] for k in wanted if k != HEAD))


def store_rows(conn: Any, campaign_id: str, fresh: dict[str, tuple[str, str]], seq: int | None = None) -> None:
    """Write `key -> (digest, text)` into the cache (the caller holds a write transaction),
    and the change number every piece is now current with (`seq`)."""
    conn.execute(DDL)
    if seq is not None:
        conn.execute(SEQ_DDL)
        conn.execute(
            "INSERT INTO show_cache_seq (campaign_id, seq) VALUES (?, ?) "
            "ON CONFLICT (campaign_id) DO UPDATE SET seq = EXCLUDED.seq",
            (campaign_id, seq),
        )
    conn.executemany(
        "INSERT INTO show_cache (campaign_id, key, digest, body) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (campaign_id, key) DO UPDATE SET digest = EXCLUDED.digest, body = EXCLUDED.body",
        [(campaign_id, k, d, zlib.compress(t.encode(), 6)) for k, (d, t) in fresh.items()],
    )


def quick_show(path: Path, campaign_id: str, schema_version: str, out: Any) -> bool:
    """Print the document from the cache in one read transaction; False (nothing printed)
    when any piece is missing or stale, or the database is not one this path reads."""
    from campaign.store.quick import open_current

    conn = open_current(path, schema_version=schema_version)
    if conn is None:
        return False
    try:
        conn.execute("BEGIN")
        doc = cached_pieces(conn, campaign_id)
        if doc is None:
            return False
        text = "".join(doc)  # read whole before printing: a failure prints nothing
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    out.write(text + "\n")
    return True
