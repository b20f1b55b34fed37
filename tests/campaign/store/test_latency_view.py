"""Latency per level, from the store's packed rounds to the view, `show --json` and the
journal's level table (a real SQLite store in a temp dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.domain.models import EffectiveConfig, LevelResult, Stat
from campaign.domain.records import LevelComparison, Verdict
from campaign.journal.experiment_section import level_table
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store

PLAYBOOK = {
    "name": "lat",
    "verdict": {"metric": "output_tokens_per_s", "latency_limit": {"metric": "ttft_ms", "stat": "p90", "max_ms": 500}},
    "workloads": {"parallel": {"concurrency": [1, 10]}},
}


def lv(c: int, tps: float, ttft: float, itl: float) -> LevelResult:
    """A level whose percentiles are distinct multiples of its TTFT/ITL, so a mixed-up stat shows."""
    return LevelResult(
        concurrency=c,
        requests=2 * c,
        output_tokens_per_s=tps,
        ttft_ms=Stat(mean=ttft, p50=ttft, p90=1.5 * ttft, p99=2 * ttft),
        itl_ms=Stat(mean=itl, p50=itl, p90=1.5 * itl, p99=3 * itl),
        tpot_ms=Stat(p50=itl / 4, p99=itl / 2),
        e2e_ms=Stat(p50=1000 + ttft, p99=2000 + ttft),
    )


@pytest.fixture()
def measured(tmp_path: Path) -> tuple[Store, str, str]:
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign("lat", playbook=PLAYBOOK, node="sim-0").id
    store.upsert_hypothesis(cid, HypothesisSpec(name="eagle3", flags={"speculative-algorithm": "EAGLE3"}))
    base = store.start_experiment(cid, "baseline", role="baseline", config=EffectiveConfig(), node="sim-0")
    for rep, ttft in enumerate((100.0, 120.0)):
        store.record_side(
            base.id,
            "baseline",
            rep,
            [("parallel", lv(1, 90, ttft, 10), "w"), ("parallel", lv(10, 450, 4 * ttft, 30), "w")],
        )
    store.finish_experiment(base.id, node_seconds=10)
    store.update_campaign(cid, baseline_experiment_id=base.id)
    exp = store.start_experiment(
        cid,
        "eagle3",
        config=EffectiveConfig(flags={"speculative-algorithm": "EAGLE3"}),
        node="sim-0",
        baseline_ref=base.id,
    )
    for rep, ttft in enumerate((60.0, 80.0)):  # no interleaved baseline: the baseline's rounds are borrowed
        store.record_side(
            exp.id,
            "candidate",
            rep,
            [("parallel", lv(1, 120, ttft, 8), "w"), ("parallel", lv(10, 300, 4 * ttft, 40), "w")],
        )
    levels = [
        LevelComparison(
            workload="parallel",
            concurrency=c,
            baseline_mean=b,
            candidate_mean=k,
            delta_pct=d,
            ci_low_pct=d - 3,
            ci_high_pct=d + 3,
            n_baseline=2,
            n_candidate=2,
            winner=w,
            baseline_meets_limit=bm,
            candidate_meets_limit=cm,
        )
        for c, b, k, d, w, bm, cm in (
            (1, 90, 120, 33.3, "candidate", True, True),
            (10, 450, 300, -33.3, "candidate", False, True),
        )
    ]
    store.record_verdict(exp.id, Verdict(kind="inconclusive", reason="mixed", levels=levels))  # type: ignore[arg-type]
    store.finish_experiment(exp.id, node_seconds=10)
    return store, cid, exp.id


def test_every_level_carries_each_sides_latency_percentiles(measured: tuple[Store, str, str]) -> None:
    store, cid, _ = measured
    row = next(r for r in store.view(cid).experiments[0].rows if r.concurrency == 1)
    # the mean over each side's launches: candidate TTFT p50 (60 + 80) / 2, baseline (100 + 120) / 2
    assert row.latency["candidate"]["ttft_ms"] == {"p50": 70.0, "p99": 140.0, "p90": 105.0}  # the limit's stat too
    assert row.latency["baseline"]["ttft_ms"] == {"p50": 110.0, "p99": 220.0, "p90": 165.0}
    assert row.latency["candidate"]["itl_ms"] == {"p50": 8.0, "p99": 24.0}
    assert row.latency["baseline"]["e2e_ms"] == {"p50": 1110.0, "p99": 2110.0}
    assert row.latency["baseline"]["tpot_ms"] == {"p50": 2.5, "p99": 5.0}


def test_show_json_has_latency_per_level_and_the_limit(measured: tuple[Store, str, str]) -> None:
    store, cid, _ = measured
    doc = json.loads("".join(store.show_json_text(cid)))
    assert doc == json.loads(json.dumps(store.show_json(cid)))  # the streamed text and the document agree
    assert doc["latency_limit"] == {"metric": "ttft_ms", "stat": "p90", "max_ms": 500.0}
    level = doc["experiments"][0]["metrics"]["parallel"]["10"]
    assert level["latency_ms"]["candidate"]["ttft_ms"]["p99"] == pytest.approx(2 * 4 * 70)
    assert level["latency_ms"]["baseline"]["itl_ms"]["p50"] == 30.0
    assert level["meets_latency_limit"] == {"candidate": True, "baseline": False}


def test_level_table_shows_ttft_and_itl_and_the_limit_against_its_figures(measured: tuple[Store, str, str]) -> None:
    store, cid, _ = measured
    view = store.view(cid)
    table = str(level_table(view.experiments[0], "parallel", 0.95, view.latency_limit))
    header, _, first, tenth = table.splitlines()
    assert "TTFT p50/p99 ms: cand (base)" in header and "ITL p50/p99 ms: cand (base)" in header
    assert "TTFT p90 limit 500 ms (cand / base)" in header
    assert "| 70/140 (110/220) | 8.0/24 (10/30) | 105 ok / 165 ok |" in first
    # C=10: candidate TTFT p90 1.5 x 280 = 420, baseline 1.5 x 440 = 660 over the 500 ms limit
    assert tenth.endswith("| 280/560 (440/880) | 40/120 (30/90) | 420 ok / 660 MISSED |")
