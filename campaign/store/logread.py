"""The campaign-wide logs a view shows (timeline events, model calls), read with plain
sqlite3 (`campaign.store.plain`): the `Store`'s mixin and the read-only journal reader
share these."""

from __future__ import annotations

import json
import sqlite3

from campaign.domain.records import CALL_FAILED, PlannerCall
from campaign.store.convert import event_record
from campaign.store.plain import rows
from campaign.store.records import EventRecord

__all__ = ["events", "planner_calls", "planner_cost"]


def events(conn: sqlite3.Connection, campaign_id: str, kind: str | None = None) -> list[EventRecord]:
    """The timeline, oldest first (`kind`: only those)."""
    where, params = ("AND kind = ? ", (campaign_id, kind)) if kind is not None else ("", (campaign_id,))
    return [
        event_record(r)
        for r in rows(
            conn, f"SELECT ts, kind, message FROM events WHERE campaign_id = ? {where}ORDER BY ts, id", params
        )
    ]


def planner_cost(conn: sqlite3.Connection, campaign_id: str) -> dict[str, float]:
    """Calls, tokens, seconds and rejections of every recorded model call."""
    calls, prompt, completion, ms, rejected = conn.execute(
        "SELECT count(id), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), "
        "coalesce(sum(latency_ms), 0.0), count(rejection) FROM llm_calls WHERE campaign_id = ?",
        (campaign_id,),
    ).fetchone()
    return {
        "calls": float(calls),
        "prompt_tokens": float(prompt),
        "completion_tokens": float(completion),
        "seconds": float(ms) / 1000,
        "rejections": float(rejected),
    }


def planner_calls(conn: sqlite3.Connection, campaign_id: str) -> list[PlannerCall]:
    """Every recorded model call, oldest first, with how it ended."""
    out = []
    for r in rows(conn, "SELECT * FROM llm_calls WHERE campaign_id = ? ORDER BY id", (campaign_id,)):
        failed = bool(r.rejection and r.rejection.startswith(CALL_FAILED))
        output = json.loads(r.output_json) if r.output_json else None
        out.append(
            PlannerCall(
                purpose=r.purpose,
                model=r.model,
                attempt=r.attempt,
                prompt_hash=r.prompt_hash,
                outcome="failed" if failed else "rejected" if r.rejection else "accepted",
                reason=r.rejection[len(CALL_FAILED) :] if failed and r.rejection else r.rejection,
                output=output if isinstance(output, str) or output is None else json.dumps(output),
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                latency_ms=r.latency_ms,
                created_at=r.created_at,
            )
        )
    return out
