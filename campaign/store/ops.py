"""Session-level helpers shared by the Store's modules (inside one open transaction)."""

from __future__ import annotations

import time

from sqlalchemy import func
from sqlmodel import Session, select

from campaign.domain.errors import UserError
from campaign.playbook.schema import HypothesisSpec
from campaign.store.convert import canonical
from campaign.store.models import CampaignRow, ExperimentRow, HypothesisRow
from campaign.store.records import unknown_campaign as unknown_campaign


class ImmutableRecordError(RuntimeError):
    """A write would change a record that is final (a finished experiment, a verdict)."""


def require_campaign(session: Session, campaign_id: str) -> CampaignRow:
    row = session.get(CampaignRow, campaign_id)
    if row is None:
        raise unknown_campaign(campaign_id)
    return row


def require_experiment(session: Session, experiment_id: str) -> ExperimentRow:
    row = session.get(ExperimentRow, experiment_id)
    if row is None:
        raise UserError(
            f"experiment {experiment_id}: no such experiment in the database (fix: run `campaign show <campaign-id>` to list experiment ids)"
        )
    return row


def upsert_hypothesis_in(
    session: Session, campaign_id: str, spec: HypothesisSpec, *, source: str = "playbook", position: int | None = None
) -> HypothesisRow:
    """Insert a queued hypothesis, or refresh the spec of one still queued.

    A hypothesis that ran keeps the spec it ran with; source, status and position of
    an existing row never change here (see set_hypothesis_status / reopen_hypothesis).
    """
    spec_json = canonical(spec)
    row = session.get(HypothesisRow, (campaign_id, spec.name))
    now = time.time()
    if row is None:
        if position is None:
            last = session.exec(
                select(func.max(HypothesisRow.position)).where(HypothesisRow.campaign_id == campaign_id)
            ).one()
            position = 0 if last is None else last + 1
        row = HypothesisRow(
            campaign_id=campaign_id, name=spec.name, source=source, spec_json=spec_json,
            status="queued", position=position, created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(row)
    elif row.status == "queued" and row.spec_json != spec_json:
        row.spec_json, row.updated_at = spec_json, now
        session.add(row)
    return row
