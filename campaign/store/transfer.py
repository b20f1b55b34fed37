"""Copying campaigns' records from one database to another (SQLite file <-> PostgreSQL).

Why rows and not a dump: the two databases differ in types (booleans, BLOB/bytea) and
in their change-log triggers; reading rows through SQLAlchemy and inserting them into
a database whose schema the Store created keeps every value typed as the models say,
and the destination's own triggers stamp the journal's change log.  The generated ids
of the log tables (events, model calls) are left to the destination, in the source's
order, so its sequences stay right.  What is not a record is not copied: the run lock,
the loop's kept counts (counted again from the records on first use) and the `show`
cache.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.engine import Engine

from campaign.domain.errors import UserError
from campaign.store.db import read_session, write_session
from campaign.store.models import (
    ArtifactRow,
    CampaignRow,
    EventRow,
    ExperimentRow,
    FingerprintRow,
    HypothesisRow,
    LlmCallRow,
    ReviewRow,
    RunSideRow,
    VerdictRow,
)

__all__ = ["copy_campaigns"]

_BY_CAMPAIGN = [CampaignRow, FingerprintRow, HypothesisRow, ExperimentRow, ReviewRow, LlmCallRow, EventRow]
_BY_EXPERIMENT = [RunSideRow, VerdictRow, ArtifactRow]
_GENERATED_ID = (LlmCallRow, EventRow)


def _table(model: Any) -> Table:
    return model.__table__  # type: ignore[no-any-return]


def _rows(conn: Any, model: Any, campaign_id: str, experiment_ids: list[str]) -> list[dict[str, Any]]:
    t = _table(model)
    if model in _BY_EXPERIMENT:
        found: list[dict[str, Any]] = []
        for start in range(0, len(experiment_ids), 500):
            part = experiment_ids[start : start + 500]
            found += [dict(r._mapping) for r in conn.execute(select(t).where(t.c.experiment_id.in_(part)))]
        return found
    key = t.c.id if model is CampaignRow else t.c.campaign_id
    order = [t.c.id] if model in _GENERATED_ID else [t.c.started_at, t.c.id] if model is ExperimentRow else []
    rows = [dict(r._mapping) for r in conn.execute(select(t).where(key == campaign_id).order_by(*order))]
    if model in _GENERATED_ID:
        for r in rows:
            r.pop("id")
    return rows


def copy_campaigns(src: Engine, dst: Engine, campaign_ids: list[str] | None = None) -> list[str]:
    """Copy the campaigns (all of them without `campaign_ids`) from `src` to `dst`, each in
    one write transaction; a campaign already in `dst` is refused before anything is
    written.  Returns the ids copied."""
    with read_session(src) as s:
        known = [r[0] for r in s.connection().execute(select(_table(CampaignRow).c.id))]
    wanted = known if campaign_ids is None else campaign_ids
    missing = [c for c in wanted if c not in known]
    if missing:
        raise UserError(
            f"campaign {missing[0]}: not in the source database (fix: `campaign status --db SOURCE` "
            "lists its campaigns)"
        )
    with read_session(dst) as d:
        there = {r[0] for r in d.connection().execute(select(_table(CampaignRow).c.id))}
    clash = [c for c in wanted if c in there]
    if clash:
        raise UserError(
            f"campaign {clash[0]}: already in the destination database (fix: copy into another "
            "database, or pass --campaign with the ids that are not there)"
        )
    for cid in wanted:
        with read_session(src) as s:
            conn = s.connection()
            exp = _table(ExperimentRow)
            ids = [r[0] for r in conn.execute(select(exp.c.id).where(exp.c.campaign_id == cid))]
            data = [(m, _rows(conn, m, cid, ids)) for m in _BY_CAMPAIGN[:4] + _BY_EXPERIMENT + _BY_CAMPAIGN[4:]]
        with write_session(dst) as d:
            out = d.connection()
            for model, rows in data:
                if rows:
                    out.execute(_table(model).insert(), rows)
    return wanted
