"""Regenerate the journal (and its plots) from the store: the only writer of the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish_journal(store: Any, campaign_id: str, path: Path, *, db_label: str = "") -> Path:
    from campaign.journal import render_journal, write_journal
    from campaign.plots import render_plots

    view = store.view(campaign_id)
    path = Path(path)
    plot_dir = path.parent / (path.stem + "-plots")
    plots = render_plots(view, plot_dir)
    rel = {k: str(Path(v) if Path(v).is_absolute() is False and str(v).startswith(path.stem) else
                  Path(plot_dir.name) / Path(v).name) for k, v in plots.items()}
    existing = path.read_text(encoding="utf-8") if path.exists() else None
    text = render_journal(view, existing, plot_paths=rel, db_label=db_label) \
        if _accepts_db_label(render_journal) else render_journal(view, existing, plot_paths=rel)
    write_journal(path, text)
    return path


def _accepts_db_label(fn) -> bool:
    import inspect

    return "db_label" in inspect.signature(fn).parameters
