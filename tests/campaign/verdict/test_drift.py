"""Drift: a fresh measurement of the baseline config that moved beyond the node's
noise is recorded as an event and an artifact, with plain numbers in a real SQLite store."""

from __future__ import annotations

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.loop.experiment import check_drift
from campaign.playbook.schema import Playbook
from campaign.store import Store

PB = Playbook.model_validate({"name": "d", "workloads": {"w": {"concurrency": [1, 8]}}})


def _side(store, eid, side, rep, values):
    store.record_side(eid, side, rep, [("w", LevelResult(concurrency=c, requests=1, output_tokens_per_s=v), "h")
                                       for c, v in values.items()])


def _setup(tmp_path):
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("d", playbook=PB).id
    cfg = EffectiveConfig(flags={"a": 1})
    base = store.start_experiment(cid, "baseline", config=cfg, role="baseline", attempt=1).id
    _side(store, base, "baseline", 0, {1: 100.0, 8: 500.0})
    _side(store, base, "baseline", 1, {1: 101.0, 8: 505.0})
    store.finish_experiment(base, "finished")
    exp = store.start_experiment(cid, "h", config=cfg, attempt=1, baseline_ref=base).id
    return store, cid, base, exp


def test_drift_beyond_noise_is_recorded(tmp_path):
    store, cid, base, exp = _setup(tmp_path)
    _side(store, exp, "baseline", 0, {1: 88.0, 8: 440.0})  # -12%: the node slowed down
    msg = check_drift(store, cid, base, exp, 0, "output_tokens_per_s", noise_pct=1.0)
    assert msg and "w C=1 -12" in msg and "w C=8" in msg
    assert [e.message for e in store.events(cid, "drift")] == [msg]
    assert store.get_artifact(exp, "drift", 0) == msg
    assert any("drift" in n for n in store.view(cid).drift_notes)


def test_no_drift_within_noise(tmp_path):
    store, cid, base, exp = _setup(tmp_path)
    _side(store, exp, "baseline", 0, {1: 100.5, 8: 502.0})
    assert check_drift(store, cid, base, exp, 0, "output_tokens_per_s", noise_pct=1.0) is None
    assert store.events(cid, "drift") == []


def test_noise_floor_per_workload_keeps_a_steady_workload_tight(tmp_path):
    from campaign.loop.experiment import baseline_noise, baseline_noise_by_workload

    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("d", playbook=PB).id
    base = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline", attempt=1).id
    for rep, (steady, wave) in enumerate([(89.1, 539.2), (89.2, 587.8)]):  # one hiccup in the sweep
        store.record_side(base, "baseline", rep, [
            ("single", LevelResult(concurrency=1, requests=6, output_tokens_per_s=steady), "h"),
            ("sweep", LevelResult(concurrency=100, requests=100, output_tokens_per_s=wave), "h")])
    pooled, df = baseline_noise(store, base, "output_tokens_per_s")
    per = baseline_noise_by_workload(store, base, "output_tokens_per_s")
    assert df == 2 and pooled > 4.0
    assert per["single"][0] < 0.1 and per["single"][1] == 1
    assert per["sweep"][0] > 6.0
    assert baseline_noise_by_workload(store, None, "output_tokens_per_s") == {}
