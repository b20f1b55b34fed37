"""The journal's current baseline: its figures, and how it moved from one re-measurement
to the next.  Two baselines' headlines compare only where they are the same workload,
level and work (`not_compared`); the overview plot's baseline line breaks where they do not.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from campaign.domain.records import BaselineView, CampaignView
from campaign.journal import mdsafe
from campaign.journal.format import config_code, fmt_num, fmt_pct, fmt_time, headline_of, metric_of, unit_of
from campaign.journal.mdsafe import Md

__all__ = ["BaselineHeadline", "baseline_context", "baseline_headline", "not_compared"]


class BaselineHeadline(NamedTuple):
    """A baseline's headline figure: its workload's lowest level."""

    workload: str
    concurrency: int
    value: float

    @property
    def label(self) -> str:
        return f"{self.workload} C={self.concurrency}"


def baseline_headline(b: BaselineView, preferred: str | None = None) -> BaselineHeadline | None:
    if not b.figures:
        return None
    workload = headline_of(list(b.figures), preferred)
    levels = b.figures[workload]
    if not levels:
        return None
    c = min(levels)
    return BaselineHeadline(workload, c, levels[c])


def not_compared(head: BaselineHeadline, b: BaselineView, was_head: BaselineHeadline, was: BaselineView) -> str | None:
    """Why two baselines' headlines do not compare (None: they do): the headline moved
    to another workload or level, or its workload's requests changed (longer outputs,
    other counts, another prompt order: `campaign.domain.work`).  Either way the change
    between them is not a speed-up or a slow-down."""
    if (head.workload, head.concurrency) != (was_head.workload, was_head.concurrency):
        return f"not compared (the headline was {was_head.label})"
    now, then = b.work.get(head.workload), was.work.get(head.workload)
    if now is not None and then is not None and now.key != then.key:
        return f"not compared (other work: {'; '.join(now.differences(then))})"
    return None


def _headline_change(head: BaselineHeadline, b: BaselineView, previous: tuple[BaselineHeadline, BaselineView]) -> str:
    """The headline's change since the baseline before, or why it is not given."""
    was_head, was = previous
    why = not_compared(head, b, was_head, was)
    return mdsafe.text(why) if why else fmt_pct((head.value / was_head.value - 1) * 100)


def baseline_context(view: CampaignView) -> dict[str, Any] | None:
    b = view.baseline
    if b is None:
        return None
    unit = unit_of(next((metric_of(e) for e in view.experiments if e.rows), "output_tokens_per_s"))
    figures = []
    for wl, levels in b.figures.items():
        if len(levels) == 1:
            ((c, x),) = levels.items()
            figures.append(Md(f"**{mdsafe.text(wl)}**: {fmt_num(x)} {unit} at C={c}"))
        elif levels:
            peak = max(levels, key=lambda c: levels[c])
            by_c = " · ".join(f"{c}: {fmt_num(levels[c])}" for c in sorted(levels))
            figures.append(
                Md(f"**{mdsafe.text(wl)}** ({unit} by C): {by_c} (peak {fmt_num(levels[peak])} at C={peak})")
            )
    history, previous = [], None
    for h in view.baseline_history:
        head = baseline_headline(h, view.headline_workload)
        fig = f"{fmt_num(head.value)} {unit} ({mdsafe.text(head.label)})" if head else "no figures"
        change = f", {_headline_change(head, h, previous)}" if head and previous else ""
        history.append(
            Md(
                f"{mdsafe.text(h.reason or 'measured')}: {fig}{change}, "
                f"{mdsafe.code(h.experiment_id)}, {fmt_time(h.measured_at)}"
            )
        )
        previous = (head, h) if head else previous
    return {
        "id": Md(mdsafe.code(b.experiment_id)),
        "reason": mdsafe.text(b.reason) if b.reason else None,
        "measured": fmt_time(b.measured_at),
        "noise": (
            f"±{b.noise_pct:.1f}%" + (f" over {b.launches} launches" if b.launches else "")
            if b.noise_pct is not None
            else None
        ),
        "config": config_code(b.config.flags, b.config.env),
        "figures": figures,
        "history": history,
    }
