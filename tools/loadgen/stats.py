"""Pure arithmetic of a load sweep: request counts, percentiles, one level's figures.

Kept apart from the HTTP code so every formula is tested with plain numbers.  The
formulas are those of SGLang's ``bench_serving`` and vLLM's ``vllm bench serve`` (see
``tools.loadgen.sweep``'s docstring); percentiles use linear interpolation between closest
ranks, as ``numpy.percentile`` does by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from campaign.domain.models import LevelResult, Stat
from campaign.domain.request_count import requests_for_level

__all__ = ["MAX_ERROR_SAMPLES", "RequestOutcome", "percentile", "requests_for_level", "stat_ms", "summarize_level"]

#: error samples kept per level: enough to diagnose, small enough to store.
MAX_ERROR_SAMPLES = 5


@dataclass(slots=True)
class RequestOutcome:
    """What one streamed request measured: in wall seconds, or in node seconds when the
    server stamped every event with its own clock (`clock="node"`, the simulated node)."""

    ok: bool
    ttft_s: float = 0.0
    e2e_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    input_tokens: int = 0
    usage: bool = False  # the server streamed a usage block (else tokens = counted chunks)
    error: str = ""
    clock: str = "wall"  # "node": the times below and start/end are the node's clock
    start_s: float = 0.0  # node clock only: the request's arrival and its last event
    end_s: float = 0.0


def percentile(sorted_values: list[float], pct: float) -> float:
    """Linear-interpolated percentile of an ascending list (numpy's default method)."""
    if not sorted_values:
        return 0.0
    rank = (len(sorted_values) - 1) * pct / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (rank - lo)


def stat_ms(values_s: list[float], scale: float) -> Stat:
    """Mean/p50/p90/p99 of wall-second samples, as node milliseconds."""
    if not values_s:
        return Stat()
    ordered = sorted(values_s)
    k = 1000.0 * scale
    return Stat(
        mean=sum(ordered) / len(ordered) * k,
        p50=percentile(ordered, 50) * k,
        p90=percentile(ordered, 90) * k,
        p99=percentile(ordered, 99) * k,
    )


def summarize_level(
    concurrency: int, outcomes: list[RequestOutcome], duration_s: float, time_scale: float
) -> LevelResult:
    """One level's figures from its measured requests (warm-ups excluded).

    ``duration_s`` is wall time from dispatching the first request to the end of the
    last; every figure is converted to node time (durations x K, rates / K).  When every
    measured request carries the node's own clock, that clock is used instead: duration
    from the first arrival to the last event, times as stamped (no scaling).
    """
    good = [o for o in outcomes if o.ok]
    node_duration = duration_s * time_scale
    if good and all(o.clock == "node" for o in good):
        node_duration = max(o.end_s for o in good) - min(o.start_s for o in good)
        time_scale = 1.0
    output_tokens = sum(o.output_tokens for o in good)
    tpots = [(o.e2e_s - o.ttft_s) / (o.output_tokens - 1) for o in good if o.output_tokens > 1]
    itls = [gap for o in good for gap in o.itl_s]
    samples: list[str] = []
    for o in outcomes:
        if not o.ok and o.error not in samples and len(samples) < MAX_ERROR_SAMPLES:
            samples.append(o.error)
    return LevelResult(
        concurrency=concurrency,
        requests=len(outcomes),
        errors=len(outcomes) - len(good),
        output_tokens=output_tokens,
        input_tokens=sum(o.input_tokens for o in good),
        duration_s=node_duration,
        output_tokens_per_s=output_tokens / node_duration if node_duration > 0 else 0.0,
        requests_per_s=len(good) / node_duration if node_duration > 0 else 0.0,
        ttft_ms=stat_ms([o.ttft_s for o in good], time_scale),
        itl_ms=stat_ms(itls, time_scale),
        tpot_ms=stat_ms(tpots, time_scale),
        e2e_ms=stat_ms([o.e2e_s for o in good], time_scale),
        token_source="usage" if good and all(o.usage for o in good) else ("chunks" if good else "usage"),
        error_samples=samples,
    )
