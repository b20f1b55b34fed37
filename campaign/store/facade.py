"""The campaign record: one SQLite file (WAL), or a PostgreSQL database, holding everything
a campaign measured.

Semantics follow Optuna's storage: every write is an idempotent upsert keyed so a
graph node resumed after an interrupt writes nothing twice, finished experiments and
verdicts are immutable (same content again: no-op; different: ImmutableRecordError),
and readers (`campaign status`, the journal) read snapshots (WAL, or PostgreSQL's
REPEATABLE READ) that never block the writer.  One engine per Store; sessions are short and thread-safe to open.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from campaign.domain.errors import UserError
from campaign.domain.location import is_url
from campaign.domain.models import Fingerprint
from campaign.domain.records import CampaignStatus, CampaignView, DeadEnd
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.store import lock as store_lock
from campaign.store.convert import campaign_record, canonical, fingerprint_id, hypothesis_record
from campaign.store.db import BUSY_TIMEOUT_MS, driver_connection, open_engine, read_session, write_session
from campaign.store.experiments import ExperimentsMixin
from campaign.store.export import LevelMeasurement, level_measurements
from campaign.store.launches import LaunchesMixin
from campaign.store.loopreads import LoopReadsMixin
from campaign.store.memo import ParseMemo
from campaign.store.models import CampaignRow, FingerprintRow, HypothesisRow, RunLockRow
from campaign.store.ops import ImmutableRecordError, require_campaign, unknown_campaign, upsert_hypothesis_in
from campaign.store.records import BASELINE_HYPOTHESIS, CampaignRecord, HypothesisRecord, HypothesisStatus
from campaign.store.reviews import ReviewLogMixin
from campaign.store.snapshot import read_snapshot
from campaign.store.view import ENVIRONMENT_EVENT, CampaignSnapshot, build_view, dead_ends, show_json

__all__ = ["BASELINE_HYPOTHESIS", "UNSET", "ImmutableRecordError", "Store", "fingerprint_id"]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()  # "leave unchanged", where None is a meaningful value


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-") or "campaign"


class Store(ExperimentsMixin, LaunchesMixin, ReviewLogMixin, LoopReadsMixin):
    """All reads and writes of the campaign database (see module docstring)."""

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        #: the file path, or the PostgreSQL URL (no password in it): what `Store(...)` reopens
        self.location = str(path)
        self.path = Path(path)  # the SQLite file (meaningless for a URL)
        self._engine = open_engine(
            self.location if is_url(self.location) else self.path, busy_timeout_ms=busy_timeout_ms
        )
        self._memo = ParseMemo()  # records decoded before: the journal's update reads them again after every verdict

    def close(self) -> None:
        store_lock.release_all(self._engine)
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- campaigns
    def create_campaign(
        self,
        name: str,
        *,
        playbook: Playbook | dict[str, Any],
        playbook_path: str = "",
        node: str = "",
        time_scale: float = 1.0,
        description: str | None = None,
        campaign_id: str | None = None,
    ) -> CampaignRecord:
        """A new running campaign; with an explicit `campaign_id` that exists, that one is returned."""
        pb = playbook.model_dump(mode="json") if isinstance(playbook, Playbook) else playbook
        with write_session(self._engine) as s:
            if campaign_id is not None and (existing := s.get(CampaignRow, campaign_id)) is not None:
                return campaign_record(existing)
            cid = campaign_id or f"{_slug(name)}-{secrets.token_hex(3)}"
            now = time.time()
            row = CampaignRow(
                id=cid, name=name, playbook_path=playbook_path, playbook_json=json.dumps(pb),  # key order kept: workload order matters
                description=pb.get("description", "") if description is None else description,
                node=node, time_scale=time_scale, created_at=now, updated_at=now,
            )  # fmt: skip
            s.add(row)
            return campaign_record(row)

    def get_campaign(self, campaign_id: str) -> CampaignRecord:
        """The campaign, or UserError naming the id (and `campaign status`)."""
        with read_session(self._engine) as s:
            return campaign_record(require_campaign(s, campaign_id))

    def list_campaigns(self, name: str | None = None) -> list[CampaignRecord]:
        """Newest first; only those called `name` when given."""
        with read_session(self._engine) as s:
            q = select(CampaignRow)
            if name is not None:
                q = q.where(CampaignRow.name == name)
            return [campaign_record(r) for r in s.exec(q.order_by(col(CampaignRow.created_at).desc()))]

    def update_campaign(
        self,
        campaign_id: str,
        *,
        status: CampaignStatus | None = None,
        halt_reason: str | None = UNSET,
        baseline_experiment_id: str | None = UNSET,
        overrides: dict[str, Any] | None = None,
        node: str | None = None,
        time_scale: float | None = None,
    ) -> CampaignRecord:
        """Set the given fields (None/UNSET: unchanged; `halt_reason=None` clears it;
        `overrides` replaces the whole overrides dict)."""
        with write_session(self._engine) as s:
            row = require_campaign(s, campaign_id)
            if status is not None:
                row.status = status
            if halt_reason is not UNSET:
                row.halt_reason = halt_reason
            if baseline_experiment_id is not UNSET:
                row.baseline_experiment_id = baseline_experiment_id
            if overrides is not None:
                row.overrides_json = canonical(overrides)
            if node is not None:
                row.node = node
            if time_scale is not None:
                row.time_scale = time_scale
            row.updated_at = time.time()
            s.add(row)
            return campaign_record(row)

    # --------------------------------------------------------------- hypotheses
    def upsert_hypothesis(
        self, campaign_id: str, spec: HypothesisSpec, *, source: str = "playbook", position: int | None = None
    ) -> HypothesisRecord:
        """Queue `spec` (appended unless `position`); an existing one keeps its status and source."""
        with write_session(self._engine) as s:
            require_campaign(s, campaign_id)
            return hypothesis_record(upsert_hypothesis_in(s, campaign_id, spec, source=source, position=position))

    def get_hypothesis(self, campaign_id: str, name: str) -> HypothesisRecord | None:
        with read_session(self._engine) as s:
            row = s.get(HypothesisRow, (campaign_id, name))
            return hypothesis_record(row) if row else None

    def list_hypotheses(self, campaign_id: str, status: HypothesisStatus | None = None) -> list[HypothesisRecord]:
        """In queue order (position)."""
        with read_session(self._engine) as s:
            q = select(HypothesisRow).where(HypothesisRow.campaign_id == campaign_id)
            if status is not None:
                q = q.where(HypothesisRow.status == status)
            return [hypothesis_record(r) for r in s.exec(q.order_by(col(HypothesisRow.position)))]

    def set_hypothesis_status(
        self, campaign_id: str, name: str, status: HypothesisStatus, *, rejection_reason: str | None = None
    ) -> HypothesisRecord:
        with write_session(self._engine) as s:
            row = s.get(HypothesisRow, (campaign_id, name))
            if row is None:
                raise UserError(
                    f"campaign {campaign_id}: no hypothesis named {name!r} (fix: run `campaign show {campaign_id}` to list them)"
                )
            row.status, row.updated_at = status, time.time()
            row.rejection_reason = rejection_reason if status == "rejected" else row.rejection_reason
            s.add(row)
            return hypothesis_record(row)

    def reopen_hypothesis(self, campaign_id: str, name: str) -> bool:
        """Queue a finished or rejected hypothesis again (source "reopened", reopen_count + 1).
        Idempotent: one already queued or running is left alone (False)."""
        with write_session(self._engine) as s:
            row = s.get(HypothesisRow, (campaign_id, name))
            if row is None or row.status in ("queued", "running"):
                return False
            row.status, row.source, row.rejection_reason = "queued", "reopened", None
            row.reopen_count += 1
            row.updated_at = time.time()
            s.add(row)
            return True

    def next_queued_hypothesis(self, campaign_id: str) -> HypothesisRecord | None:
        """The queued hypothesis with the lowest position."""
        queued = self.list_hypotheses(campaign_id, "queued")
        return queued[0] if queued else None

    # ------------------------------------------------------------- fingerprints
    def record_fingerprint(self, campaign_id: str, fingerprint: Fingerprint) -> str:
        """Record the node's environment; returns its content-hash id.  When it differs
        from the campaign's latest, it becomes the latest and an "environment" event
        names the changed components."""
        fid = fingerprint_id(fingerprint)
        with write_session(self._engine) as s:
            require_campaign(s, campaign_id)
            latest = self._latest_fingerprint_row(s, campaign_id)
            if latest is not None and latest.id == fid:
                return fid
            row = s.get(FingerprintRow, (campaign_id, fid))
            if row is None:
                row = FingerprintRow(
                    campaign_id=campaign_id, id=fid, json_=canonical(fingerprint), recorded_at=time.time()
                )
            row.seq = (latest.seq + 1) if latest else 1
            s.add(row)
            if latest is not None:
                before = Fingerprint.model_validate_json(latest.json_).components()
                after = fingerprint.components()
                changes = [f"{k} {before.get(k, '') or '-'} -> {after.get(k, '') or '-'}"
                           for k in sorted(set(before) | set(after)) if before.get(k, "") != after.get(k, "")]  # fmt: skip
                message = "environment changed: " + ", ".join(changes)
                self._add_event_in(s, campaign_id, ENVIRONMENT_EVENT, message, key=f"{latest.id}->{fid}@{row.seq}")
            return fid

    @staticmethod
    def _latest_fingerprint_row(s: Any, campaign_id: str) -> FingerprintRow | None:
        q = select(FingerprintRow).where(FingerprintRow.campaign_id == campaign_id)
        row: FingerprintRow | None = s.exec(q.order_by(col(FingerprintRow.seq).desc())).first()
        return row

    def latest_fingerprint(self, campaign_id: str) -> Fingerprint | None:
        with read_session(self._engine) as s:
            row = self._latest_fingerprint_row(s, campaign_id)
            return Fingerprint.model_validate_json(row.json_) if row else None

    def get_fingerprint(self, campaign_id: str, fingerprint_id_: str) -> Fingerprint | None:
        with read_session(self._engine) as s:
            row = s.get(FingerprintRow, (campaign_id, fingerprint_id_))
            return Fingerprint.model_validate_json(row.json_) if row else None

    # ---------------------------------------------------------------- the views
    def snapshot(self, campaign_id: str) -> CampaignSnapshot:
        """Every record of the campaign, read in one transaction."""
        with read_session(self._engine) as s:
            return read_snapshot(driver_connection(s), campaign_id)

    def dead_ends(self, campaign_id: str) -> list[DeadEnd]:
        """Dead-end verdicts with revisit_on, environment at the time and `reopened`."""
        return dead_ends(self.snapshot(campaign_id))

    def view(
        self, campaign_id: str, *, detail: set[str] | None = None, window: Collection[str] | None = None
    ) -> CampaignView:
        """Everything the journal renders, from one consistent read.  With `detail`, only
        those experiments carry their measured rows (the others: verdict only), for an
        incremental journal update that re-renders just what changed; with `window`, only
        those candidates are in the view at all (campaign-wide parts are whole)."""
        with read_session(self._engine) as s:
            snap = read_snapshot(driver_connection(s), campaign_id, detail, window=window, memo=self._memo)
        # a journal update's baselines come from the memo (the same objects each time): their
        # views can be reused too; a full view decodes fresh rounds, nothing to reuse
        return build_view(snap, self._memo.baseline_views if detail is not None else None)

    def journal_changes(self, campaign_id: str, since: int | None) -> tuple[list[str], set[str] | None, int]:
        """(candidate ids in start order, the experiments changed after `since`, the
        latest change number) from one read (`campaign.store.changes`).  Changed is None
        when `since` is None or ahead of the database (restored from an older copy):
        the reader must take everything as changed."""
        from campaign.store import changes

        with read_session(self._engine) as s:
            return changes.journal_changes(driver_connection(s), campaign_id, since)

    def level_measurements(self, campaign_id: str) -> list[LevelMeasurement]:
        """Every recorded level of every launch, one consistent read (`campaign export`)."""
        with read_session(self._engine) as s:
            return level_measurements(s, campaign_id)

    def show_json(self, campaign_id: str) -> dict[str, Any]:
        """The `campaign show --json` document."""
        return show_json(self.view(campaign_id))

    def show_json_text(self, campaign_id: str) -> Iterator[str]:
        """The same document as indented JSON text, streamed experiment by experiment
        from one read transaction (campaign.store.show)."""
        yield from self._show_pieces(campaign_id, cached_text=True)

    def refresh_show_cache(self, campaign_id: str) -> None:
        """Build and store the `show --json` text of what changed since the last call (the
        loop calls it after each verdict, so `show --json` reads stored text at any size);
        the pieces already stored are not read."""
        from campaign.store import changes
        from campaign.store.show import DriverConn, show_json_chunks
        from campaign.store.showcache import refresh_scope

        fresh: dict[str, tuple[str, str]] = {}
        with read_session(self._engine) as s:
            conn = driver_connection(s)
            seq = changes.latest(conn)
            scope = refresh_scope(
                DriverConn(s), campaign_id, seq, lambda since: changes.changed_since(conn, campaign_id, since)
            )
            for _ in show_json_chunks(s, campaign_id, fresh=fresh, cached_text=False, scope=scope):
                pass
        self._store_show_pieces(campaign_id, fresh, seq)

    def _show_pieces(self, campaign_id: str, *, cached_text: bool) -> Iterator[str]:
        from campaign.store.show import show_json_chunks

        fresh: dict[str, tuple[str, str]] = {}
        with read_session(self._engine) as s:
            yield from show_json_chunks(s, campaign_id, fresh=fresh, cached_text=cached_text)
        self._store_show_pieces(campaign_id, fresh)

    def _store_show_pieces(self, campaign_id: str, fresh: dict[str, tuple[str, str]], seq: int | None = None) -> None:
        """Best effort: the cache is not a record, so a read-only or busy database skips it.
        `seq`: the change number a refresh looked at (every piece is current with it)."""
        if not fresh and seq is None:
            return
        from sqlalchemy.exc import DBAPIError

        from campaign.store.show import DriverConn
        from campaign.store.showcache import store_rows

        try:
            with write_session(self._engine) as s:
                store_rows(DriverConn(s), campaign_id, fresh, seq)
        except DBAPIError:
            pass

    def copy_campaigns_to(self, dst: Store, campaign_ids: list[str] | None = None) -> list[str]:
        """Copy campaigns' records into another database (campaign.store.transfer)."""
        from campaign.store.transfer import copy_campaigns

        return copy_campaigns(self._engine, dst._engine, campaign_ids)

    # ----------------------------------------------------------------- run lock
    def acquire_run_lock(self, campaign_id: str, owner: str, *, force: bool = False) -> None:
        """Raise CampaignLocked when another live process runs this campaign; a holder
        on this host whose pid is gone is taken over."""
        with read_session(self._engine) as s:
            if s.get(CampaignRow, campaign_id) is None:
                raise unknown_campaign(campaign_id)
        store_lock.acquire(self._engine, campaign_id, owner, force=force)

    def release_run_lock(self, campaign_id: str, owner: str, *, force: bool = False) -> bool:
        return store_lock.release(self._engine, campaign_id, owner, force=force)

    def lock_holder(self, campaign_id: str) -> RunLockRow | None:
        return store_lock.holder(self._engine, campaign_id)

    @contextmanager
    def run_lock(self, campaign_id: str, owner: str) -> Iterator[None]:
        """`with store.run_lock(cid, "campaign run"):` held for the block, released on every exit."""
        self.acquire_run_lock(campaign_id, owner)
        try:
            yield
        finally:
            self.release_run_lock(campaign_id, owner)
