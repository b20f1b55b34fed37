"""Store methods for what surrounds the experiments: review gates, LLM calls, timeline events.

A mixin of `campaign.store.Store` (kept apart so each module stays one concept).
Every write is an idempotent upsert: a graph node resumed after an interrupt may
call these again and must not duplicate a row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from campaign.domain.errors import UserError
from campaign.domain.records import PlannerCall
from campaign.playbook.schema import HypothesisSpec
from campaign.store import logread, tally
from campaign.store.convert import canonical, review_record
from campaign.store.db import driver_connection, read_session, write_session
from campaign.store.models import EventRow, LlmCallRow, ReviewRow
from campaign.store.ops import require_campaign, upsert_hypothesis_in
from campaign.store.records import EventRecord, ReviewDecision, ReviewRecord


class ReviewLogMixin:
    _engine: Engine

    # ------------------------------------------------------------------ reviews
    def request_review(self, campaign_id: str, reason: str, *, key: str | None = None) -> int:
        """Open a review gate and return its seq.  `key` (default: the reason) names the
        gate: asking again with the same key returns the same seq, decided or not, so a
        gate node re-run on resume does not open a second review.  Pass a key that is
        unique per gate occurrence (e.g. "dead-ends@12" or "patch:<hypothesis>")."""
        k = reason if key is None else key
        with write_session(self._engine) as s:
            require_campaign(s, campaign_id)
            found = s.exec(select(ReviewRow).where(ReviewRow.campaign_id == campaign_id, ReviewRow.key == k)).first()
            if found is not None:
                return found.seq
            last = s.exec(select(func.max(ReviewRow.seq)).where(ReviewRow.campaign_id == campaign_id)).one()
            seq = (last or 0) + 1
            s.add(ReviewRow(campaign_id=campaign_id, seq=seq, key=k, reason=reason, requested_at=time.time()))
            return seq

    def decide_review(
        self,
        campaign_id: str,
        seq: int,
        decision: ReviewDecision,
        *,
        note: str = "",
        added: Iterable[HypothesisSpec] = (),
        overrides: dict[str, Any] | None = None,
    ) -> ReviewRecord:
        """Record a human decision; `added` hypotheses are queued (source "review") and
        `overrides` merged (shallow) into the campaign's overrides, in the same transaction.
        Deciding again with the same content is a no-op; a different decision is refused."""
        added_json = canonical([h.model_dump(mode="json") for h in added])
        overrides_json = canonical(overrides or {})
        with write_session(self._engine) as s:
            campaign = require_campaign(s, campaign_id)
            row = s.get(ReviewRow, (campaign_id, seq))
            if row is None:
                raise UserError(
                    f"campaign {campaign_id}: review {seq} does not exist (fix: run `campaign status` to see the pending review)"
                )
            if row.decision is not None:
                if (row.decision, row.note, row.added_hypotheses_json, row.overrides_json) == (
                    decision, note, added_json, overrides_json,
                ):  # fmt: skip
                    return review_record(row)
                raise UserError(
                    f"campaign {campaign_id}: review {seq} was already decided ({row.decision}) "
                    f"(fix: run `campaign status` to see whether another review is pending)"
                )
            now = time.time()
            row.decision, row.note, row.decided_at = decision, note, now
            row.added_hypotheses_json, row.overrides_json = added_json, overrides_json
            s.add(row)
            for spec in added:
                upsert_hypothesis_in(s, campaign_id, spec, source="review")
            if overrides:
                merged = json.loads(campaign.overrides_json or "{}") | overrides
                campaign.overrides_json = canonical(merged)
            campaign.updated_at = now
            s.add(campaign)
            if decision == "approve" and row.key.startswith("review#"):  # a review gate: the streaks start again
                s.flush()
                tally.on_reset(driver_connection(s), campaign_id)
            return review_record(row)

    def pending_review(self, campaign_id: str) -> ReviewRecord | None:
        """The oldest undecided review, if any."""
        with read_session(self._engine) as s:
            require_campaign(s, campaign_id)
            row = s.exec(
                select(ReviewRow)
                .where(ReviewRow.campaign_id == campaign_id, col(ReviewRow.decision).is_(None))
                .order_by(col(ReviewRow.seq))
            ).first()
            return review_record(row) if row else None

    def list_reviews(self, campaign_id: str) -> list[ReviewRecord]:
        with read_session(self._engine) as s:
            rows = s.exec(select(ReviewRow).where(ReviewRow.campaign_id == campaign_id).order_by(col(ReviewRow.seq)))
            return [review_record(r) for r in rows]

    # ---------------------------------------------------------------- LLM calls
    def record_llm_call(
        self,
        campaign_id: str,
        *,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        prompt_hash: str,
        output: dict[str, Any] | list[Any] | str | None = None,
        rejection: str | None = None,
        attempt: int = 0,
    ) -> bool:
        """One model call (cost, output, why it was rejected).  Keyed by (purpose,
        prompt_hash, attempt): pass the retry index as `attempt`.  True if written."""
        with write_session(self._engine) as s:
            require_campaign(s, campaign_id)
            key = (LlmCallRow.campaign_id == campaign_id, LlmCallRow.purpose == purpose,
                   LlmCallRow.prompt_hash == prompt_hash, LlmCallRow.attempt == attempt)  # fmt: skip
            if s.exec(select(LlmCallRow.id).where(*key)).first() is not None:
                return False
            s.add(
                LlmCallRow(
                    campaign_id=campaign_id,
                    purpose=purpose,
                    model=model,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    latency_ms=latency_ms,
                    prompt_hash=prompt_hash,
                    attempt=attempt,
                    output_json=None if output is None else json.dumps(output),
                    rejection=rejection,
                    created_at=time.time(),
                )  # fmt: skip
            )
            return True

    def planner_cost(self, campaign_id: str) -> dict[str, float]:
        with read_session(self._engine) as s:
            return logread.planner_cost(driver_connection(s), campaign_id)

    def planner_calls(self, campaign_id: str) -> list[PlannerCall]:
        with read_session(self._engine) as s:
            return logread.planner_calls(driver_connection(s), campaign_id)

    # ------------------------------------------------------------------- events
    def add_event(
        self, campaign_id: str, kind: str, message: str, *, key: str | None = None, ts: float | None = None
    ) -> bool:
        """A timeline entry (kind "environment", "drift", ...), keyed by (kind, key or message)."""
        with write_session(self._engine) as s:
            return self._add_event_in(s, campaign_id, kind, message, key=key, ts=ts)

    def _add_event_in(
        self, s: Session, campaign_id: str, kind: str, message: str, *, key: str | None = None, ts: float | None = None
    ) -> bool:
        require_campaign(s, campaign_id)
        k = message if key is None else key
        found = s.exec(
            select(EventRow.id).where(EventRow.campaign_id == campaign_id, EventRow.kind == kind, EventRow.key == k)
        ).first()
        if found is not None:
            return False
        s.add(
            EventRow(campaign_id=campaign_id, ts=time.time() if ts is None else ts, kind=kind, message=message, key=k)
        )
        if kind == "environment":  # the streaks start again
            s.flush()
            tally.on_reset(driver_connection(s), campaign_id)
        return True

    def events(self, campaign_id: str, kind: str | None = None) -> list[EventRecord]:
        with read_session(self._engine) as s:
            return logread.events(driver_connection(s), campaign_id, kind)
