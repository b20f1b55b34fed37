"""Regenerate the journal (and its plots) from the store: the only writer of the journal."""

from __future__ import annotations

from pathlib import Path

from campaign.ports.store import JournalReader


def publish_journal(
    store: JournalReader, campaign_id: str, path: Path, *, db_label: str = "", plots: bool = True, verify: bool = True
) -> Path:
    """Bring the journal up to date, re-rendering only the experiments whose records changed
    (campaign.journal.incremental); plots are drawn by worker processes, not waited for.
    `verify=False` (the loop, after each verdict) skips looking at every page and plot on
    disk for a person's edits and lost files: its cost stays that of what changed."""
    from campaign.journal.incremental import publish

    return publish(store, campaign_id, Path(path), db_label=db_label, plots=plots, verify=verify)


def journal_is_stale(store: JournalReader, campaign_id: str, path: Path) -> bool:
    """The journal is older than the campaign's record (or missing): a kill landed
    between a record write and the render that follows it."""
    try:
        mtime = Path(path).stat().st_mtime
    except OSError:
        return True
    return bool(mtime < store.get_campaign(campaign_id).updated_at)


def refresh_journal(store: JournalReader, campaign_id: str, path: Path, *, db_label: str = "") -> bool:
    """Re-render a journal older than the record; True when it was rewritten."""
    if not journal_is_stale(store, campaign_id, path):
        return False
    publish_journal(store, campaign_id, path, db_label=db_label)
    return True
