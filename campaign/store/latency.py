"""Latency per level for the views: which recorded stats are read, and their mean per side.

Why a few stats and not the whole `LevelResult`: the journal and `show` read 1,000+
experiments' rounds column by column (`campaign.store.pack.level_figures`); the level
tables show p50 and p99 of TTFT, ITL, TPOT and end-to-end latency, plus the one stat
a playbook's latency limit is judged on.  The mean over a side's launches is the
statistic the verdict's limit rule uses (`campaign.verdict.rule`), so a table's figure
and its "ok / MISSED" agree.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

from campaign.domain.records import LATENCY_METRICS, LATENCY_STATS, LatencyLimitView, LevelLatency

__all__ = ["latency_fields", "latency_limit", "latency_means"]


def latency_limit(playbook: dict[str, Any]) -> LatencyLimitView | None:
    """The playbook's `verdict.latency_limit` (stored as validated JSON), or None."""
    lim = (playbook.get("verdict") or {}).get("latency_limit")
    if not isinstance(lim, dict) or "max_ms" not in lim:
        return None
    return LatencyLimitView(
        metric=str(lim.get("metric", "ttft_ms")), stat=str(lim.get("stat", "p99")), max_ms=float(lim["max_ms"])
    )


def latency_fields(playbook: dict[str, Any]) -> tuple[str, ...]:
    """The packed fields read per level: p50/p99 of each latency metric and the limit's stat."""
    fields = [f"{m}.{s}" for m in LATENCY_METRICS for s in LATENCY_STATS]
    lim = latency_limit(playbook)
    if lim is not None and f"{lim.metric}.{lim.stat}" not in fields:
        fields.append(f"{lim.metric}.{lim.stat}")
    return tuple(fields)


def latency_means(sides: dict[str, dict[str, list[float]]]) -> LevelLatency:
    """side -> field ("ttft_ms.p99") -> every launch's value  =>  side -> metric -> stat -> mean."""
    out: LevelLatency = {}
    for side, fields in sides.items():
        for field, values in fields.items():
            if values:
                metric, _, stat = field.partition(".")
                out.setdefault(side, {}).setdefault(metric, {})[stat] = fmean(values)
    return out
