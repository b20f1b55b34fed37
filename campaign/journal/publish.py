"""Regenerate the journal (and its plots) from the store: the only writer of the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish_journal(store: Any, campaign_id: str, path: Path, *, db_label: str = "",
                    plots: bool = True) -> Path:
    from campaign.journal.render import update_journal

    return update_journal(Path(path), store.view(campaign_id), db_label=db_label, plots=plots)
