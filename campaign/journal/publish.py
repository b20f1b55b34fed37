"""Regenerate the journal (and its plots) from the store: the only writer of the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish_journal(store: Any, campaign_id: str, path: Path, *, db_label: str = "",
                    plots: bool = True) -> Path:
    """Bring the journal up to date, re-rendering only the experiments whose records changed
    (campaign.journal.incremental); plots are drawn by worker processes, not waited for."""
    from campaign.journal.incremental import publish

    return publish(store, campaign_id, Path(path), db_label=db_label, plots=plots)
