"""The read records the Store hands out: defined by the store port
(`campaign.ports.records`), which its consumers type against; re-exported here so the
store's modules name them where they always have."""

from __future__ import annotations

from campaign.domain.errors import UserError
from campaign.ports.records import (
    BASELINE_HYPOTHESIS,
    ArtifactKind,
    CampaignRecord,
    EventRecord,
    ExperimentRecord,
    ExperimentRole,
    ExperimentStatus,
    HypothesisRecord,
    HypothesisSource,
    HypothesisStatus,
    ReviewDecision,
    ReviewRecord,
    RunRecord,
    RunSide,
)

__all__ = [
    "BASELINE_HYPOTHESIS",
    "ArtifactKind",
    "CampaignRecord",
    "EventRecord",
    "ExperimentRecord",
    "ExperimentRole",
    "ExperimentStatus",
    "HypothesisRecord",
    "HypothesisSource",
    "HypothesisStatus",
    "ReviewDecision",
    "ReviewRecord",
    "RunRecord",
    "RunSide",
    "unknown_campaign",
]


def unknown_campaign(campaign_id: str) -> UserError:
    return UserError(
        f"campaign {campaign_id}: no such campaign in the database (fix: run `campaign status` to list campaign ids)"
    )
