"""The latency columns of a level table: compact p50/p99 cells and the limit against them.

Why compact: a level table already carries throughput, winner and interval; latency
adds two columns, each "candidate (baseline)" as p50/p99 in milliseconds, so a reader
sees at a glance where a throughput win cost first-token or inter-token time.  The
full figures (TPOT and end-to-end too) are in `campaign show --json`.
"""

from __future__ import annotations

from campaign.domain.records import LatencyLimitView, LevelRow

__all__ = ["LATENCY_COLUMNS", "fmt_ms", "latency_cells", "latency_header", "limit_cell", "limit_header"]

#: (metric, column title): the two latency columns of every level table
LATENCY_COLUMNS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"))
_NAMES = {"ttft_ms": "TTFT", "itl_ms": "ITL", "tpot_ms": "TPOT", "e2e_ms": "E2E"}


def fmt_ms(ms: float | None) -> str:
    """Milliseconds, short: "9.5", "412", "25.5s" (a queue at C=250 waits tens of seconds)."""
    if ms is None:
        return "-"
    if ms >= 10_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms:.1f}" if ms < 10 else f"{ms:.0f}"


def _pair(row: LevelRow, side: str, metric: str) -> str | None:
    stats = row.latency.get(side, {}).get(metric)
    if not stats or "p50" not in stats:
        return None
    return f"{fmt_ms(stats['p50'])}/{fmt_ms(stats.get('p99'))}"


def latency_header() -> list[str]:
    return [f"{title} p50/p99 ms: cand (base)" for _, title in LATENCY_COLUMNS]


def latency_cells(row: LevelRow) -> list[str]:
    """One cell per latency column: "31/33 (32/33)"; a side not measured is left out."""
    cells = []
    for metric, _ in LATENCY_COLUMNS:
        cand, base = _pair(row, "candidate", metric), _pair(row, "baseline", metric)
        if cand and base:
            cells.append(f"{cand} ({base})")
        else:
            cells.append(cand or (f"- ({base})" if base else "-"))
    return cells


def limit_header(limit: LatencyLimitView | None) -> str:
    """The limit column's title names the limit itself: "TTFT p99 limit 500 ms (cand / base)"."""
    if limit is None:
        return "latency limit (cand / base)"
    return f"{_NAMES.get(limit.metric, limit.metric)} {limit.stat} limit {limit.max_ms:g} ms (cand / base)"


def limit_cell(row: LevelRow, limit: LatencyLimitView | None) -> str:
    """Each side's figure against the limit: "412 ok / 530 MISSED" (the verdict's own flags)."""
    c = row.comparison
    if c is None:
        return "-"
    parts = []
    for side, meets in (("candidate", c.candidate_meets_limit), ("baseline", c.baseline_meets_limit)):
        word = "-" if meets is None else ("ok" if meets else "MISSED")
        value = row.latency.get(side, {}).get(limit.metric, {}).get(limit.stat) if limit else None
        parts.append(word if value is None else f"{fmt_ms(value)} {word}")
    return " / ".join(parts)
