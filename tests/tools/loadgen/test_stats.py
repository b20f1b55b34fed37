"""Pure formulas of tools.loadgen.stats with plain numbers."""

from __future__ import annotations

import numpy as np
import pytest

from campaign.domain.errors import UserError
from tools.loadgen.stats import RequestOutcome, percentile, requests_for_level, summarize_level


@pytest.mark.parametrize(
    ("expr", "c", "expected"),
    [
        ("2*C", 5, 10),
        ("max(4, C)", 2, 4),
        ("max(4, C)", 9, 9),
        (16, 3, 16),
        ("16", 3, 16),
        ("C/3", 4, 2),
        ("ceil(C*1.5)", 3, 5),
        ("min(C, 2) + 1", 7, 3),
    ],
)
def test_requests_per_level_expressions(expr: str | int, c: int, expected: int) -> None:
    assert requests_for_level(expr, c) == expected


@pytest.mark.parametrize(
    "expr",
    ["__import__('os').system('true')", "C.real", "open('x')", "0", "C - C", "2**99", "D*2", "[1]", "max(C, key=1)"],
)
def test_unsafe_or_bad_expressions_are_user_errors(expr: str) -> None:
    with pytest.raises(UserError, match="requests_per_level"):
        requests_for_level(expr, 4)


@pytest.mark.parametrize("pct", [50, 90, 99])
def test_percentile_matches_numpy_linear(pct: int) -> None:
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3, 5.8])
    assert percentile(values, pct) == pytest.approx(float(np.percentile(values, pct)))
    assert percentile([], pct) == 0.0


def test_level_formulas_match_bench_serving() -> None:
    good = RequestOutcome(
        ok=True, ttft_s=0.1, e2e_s=1.0, itl_s=[0.3, 0.3, 0.3], output_tokens=10, input_tokens=5, usage=True
    )
    one_token = RequestOutcome(ok=True, ttft_s=0.2, e2e_s=0.2, output_tokens=1, usage=True)
    bad = RequestOutcome(ok=False, error="HTTP 500: boom")
    lv = summarize_level(4, [good, one_token, bad, bad], duration_s=2.0, time_scale=3.0)
    assert lv.requests == 4 and lv.errors == 2 and lv.error_samples == ["HTTP 500: boom"]
    assert lv.duration_s == pytest.approx(6.0)  # node time
    assert lv.output_tokens == 11 and lv.output_tokens_per_s == pytest.approx(11 / 6.0)
    assert lv.requests_per_s == pytest.approx(2 / 6.0)
    assert lv.tpot_ms.mean == pytest.approx((1.0 - 0.1) / 9 * 1000 * 3)  # one-token request excluded
    assert lv.ttft_ms.mean == pytest.approx(0.15 * 1000 * 3)
    assert lv.itl_ms.p50 == pytest.approx(900.0)
    assert lv.e2e_ms.p99 == pytest.approx(float(np.percentile([0.2, 1.0], 99)) * 3000)
    assert lv.token_source == "usage"
    assert (
        summarize_level(1, [RequestOutcome(ok=True, ttft_s=0.1, e2e_s=0.2, output_tokens=3)], 1.0, 1.0).token_source
        == "chunks"
    )
