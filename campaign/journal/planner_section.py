"""The journal's planner section: why the model's proposals were refused and when it stopped.

Everything here is model or endpoint text, so every cell goes through `mdsafe`.
Identical outcomes are counted, not listed again: a model that repeats one bad
answer twenty times is one row with `20` in it.
"""

from __future__ import annotations

from typing import Any

from campaign.domain.records import CampaignView, PlannerCall
from campaign.journal import mdsafe
from campaign.journal.format import table
from campaign.journal.mdsafe import Md

EXCERPT_CHARS = 100


def _excerpt(text: str | None) -> str:
    if not text:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + " …"


def _grouped(calls: list[PlannerCall]) -> list[list[Any]]:
    rows: dict[tuple[str, str, str], list[Any]] = {}
    for c in calls:
        if c.outcome == "accepted":
            continue
        key = (c.outcome, c.purpose, c.reason or "")
        if key in rows:
            rows[key][3] += 1
        else:
            rows[key] = [c.outcome, c.purpose, c.reason or "-", 1, _excerpt(c.output)]
    return list(rows.values())


def planner_context(view: CampaignView) -> dict[str, Any] | None:
    """The template's `planner` block, or None when no model was asked."""
    if not view.planner_calls and not view.planner_notes:
        return None
    refused = _grouped(view.planner_calls)
    accepted = sum(1 for c in view.planner_calls if c.outcome == "accepted")
    summary = (
        f"{len(view.planner_calls)} model calls: {accepted} accepted, "
        f"{sum(1 for c in view.planner_calls if c.outcome == 'rejected')} answers rejected, "
        f"{sum(1 for c in view.planner_calls if c.outcome == 'failed')} calls failed."
    )
    return {
        "summary": Md(summary),
        "notes": [mdsafe.text(n) for n in view.planner_notes],
        "refused": table(["outcome", "call", "reason", "times", "answer (excerpt)"], refused) if refused else None,
    }
