"""Plain-number builders shared by the verdict tests."""

from __future__ import annotations

from campaign.domain.models import LevelResult, Stat
from campaign.domain.records import LevelSamples

#: deterministic relative jitter of successive repeats (about +-0.5%)
JITTER = [0.0, 0.004, -0.005, 0.003, -0.002, 0.005]

PARALLEL_C = [1, 2, 5, 10, 30, 70, 100, 250]
EAGLE_PARALLEL = [77.5, 125.1, 183.2, 239.6, 299.5, 337.7, 338.8, 340.9]
BASE_PARALLEL = [92.6, 159.7, 292.5, 457.2, 711.0, 784.2, 761.6, 772.1]


def results(tps: float, repeats: int, *, p99_ttft: float = 100.0, phase: int = 0) -> list[LevelResult]:
    return [
        LevelResult(
            concurrency=1,
            requests=2,
            output_tokens=512,
            output_tokens_per_s=tps * (1 + JITTER[(k + phase) % len(JITTER)]),
            ttft_ms=Stat(mean=p99_ttft / 2, p50=p99_ttft / 2, p90=p99_ttft * 0.9, p99=p99_ttft),
        )
        for k in range(repeats)
    ]


def level(workload: str, c: int, base: float, cand: float, repeats: int = 3) -> LevelSamples:
    return LevelSamples(
        workload=workload, concurrency=c, baseline=results(base, repeats), candidate=results(cand, repeats, phase=1)
    )


def sweep(base: list[float], cand: list[float], repeats: int = 3, workload: str = "parallel") -> list[LevelSamples]:
    return [level(workload, c, b, x, repeats) for c, b, x in zip(PARALLEL_C, base, cand)]
