"""`campaign show --json` streamed: the document is written experiment by experiment.

Why: at 5,000 experiments the whole view (every run of every experiment) would be
built in memory before the first byte is printed.  Here one read transaction (a
consistent WAL snapshot) reads the cached text of every piece whose records did not
change (campaign.store.showcache), and builds the others from the records, one chunk
of experiments at a time; the text is exactly what
`json.dumps(Store.show_json(id), indent=2)` gives.  The pieces built here are handed
back in `fresh` for the caller to store once the read transaction is over.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

from sqlmodel import Session

from campaign.store.db import driver_connection
from campaign.store.ops import require_campaign
from campaign.store.showcache import HEAD, digests, load, pieces
from campaign.store.snapshot import read_runs, read_snapshot, read_verdicts
from campaign.store.view import CampaignSnapshot, build_view, experiment_json, experiment_view, show_json

__all__ = ["DriverConn", "show_json_chunks"]

CHUNK = 200


class DriverConn:
    """A session's driver connection (campaign.store.db.driver_connection: either
    database), for showcache's SQL."""

    def __init__(self, s: Session) -> None:
        self._conn = driver_connection(s)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> Any:
        return self._conn.executemany(sql, rows) if rows else None


def show_json_chunks(
    s: Session,
    campaign_id: str,
    *,
    chunk: int | None = None,
    fresh: dict[str, tuple[str, str]] | None = None,
    cached_text: bool = True,
    scope: list[str] | None = None,
) -> Iterator[str]:
    """The document's pieces; without `cached_text` the stored pieces come back empty (not
    read or decompressed): the loop's refresh only builds and stores what is missing.
    `scope`: only the head and those experiments' pieces (the refresh after a verdict)."""
    chunk = chunk or CHUNK
    fresh = {} if fresh is None else fresh
    conn = DriverConn(s)
    wanted = digests(conn, campaign_id, scope)
    if wanted is None:
        require_campaign(s, campaign_id)  # names the fix
        return
    cached = load(conn, campaign_id, wanted, bodies=cached_text)
    keys = [k for k in wanted if k != HEAD]
    snap: CampaignSnapshot | None = None
    if len(cached) != len(wanted):  # the head needs the outline; an experiment only its own records
        only = None if HEAD not in cached else [k for k in keys if k not in cached]
        snap = read_snapshot(driver_connection(s), campaign_id, detail=set(), only=only)
    head = cached.get(HEAD)
    if head is None:  # (an empty stored head, without `cached_text`, is not rebuilt)
        assert snap is not None
        outline = show_json(build_view(snap))  # every experiment without rows
        outline["experiments"] = []
        text = json.dumps(outline, indent=2, default=str)
        assert text.endswith("[]\n}")
        head = text[: -len("]\n}")]
        fresh[HEAD] = (wanted[HEAD], head)
    yield from pieces(head, _items(s, snap, keys, cached, wanted, fresh, chunk))


def _items(
    s: Session,
    snap: CampaignSnapshot | None,
    keys: list[str],
    cached: dict[str, str],
    wanted: dict[str, str],
    fresh: dict[str, tuple[str, str]],
    chunk: int,
) -> Iterator[str]:
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        missing = [k for k in part if k not in cached]
        if missing:
            assert snap is not None
            snap.runs.update(read_runs(driver_connection(s), missing, snap.metric(), snap.latency_fields()))
            snap.verdicts.update(read_verdicts(driver_connection(s), missing))
            snap.detail = set(missing) | {e.id for e in snap.experiments if e.role == "baseline"}
        for k in part:
            if k in cached:
                yield cached[k]
                continue
            assert snap is not None
            exp = snap.experiment(k)
            assert exp is not None, f"experiment {k} is in the digests but not in the snapshot"
            item = textwrap.indent(
                json.dumps(experiment_json(experiment_view(snap, exp), snap.min_effect_pct()), indent=2, default=str),
                "    ",
            )
            fresh[k] = (wanted[k], item)
            yield item
        for k in missing:
            assert snap is not None
            snap.runs.pop(k, None)
