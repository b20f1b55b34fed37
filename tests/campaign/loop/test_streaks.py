"""The review policy's counters come from the record, so a crash that loses a node's
state update cannot skew them (a lost `record` update once skipped a review gate)."""

from __future__ import annotations

from pathlib import Path

from campaign.domain.models import EffectiveConfig, Fingerprint
from campaign.domain.records import Verdict
from campaign.loop.streaks import experiments_recorded, streaks_from_store
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}
CAND = EffectiveConfig(flags={"cuda-graph-max-bs": 128}, env={})


def _record(store: Store, cid: str, name: str, kind: str, *, status: str = "finished") -> None:
    store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags={"cuda-graph-max-bs": 128}))
    exp = store.start_experiment(cid, name, config=CAND, attempt=1)
    store.record_verdict(exp.id, Verdict(kind=kind, reason=kind))
    store.finish_experiment(exp.id, status, None, node_seconds=1.0)


def test_streaks_follow_the_record(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="sim-0").id
    assert streaks_from_store(store, cid) == (0, 0)
    _record(store, cid, "a", "inconclusive")
    _record(store, cid, "b", "dead_end", status="failed")
    assert streaks_from_store(store, cid) == (2, 1)
    assert streaks_from_store(store, cid) == (2, 1)  # a re-run node recounts the same facts
    _record(store, cid, "c", "win")
    assert streaks_from_store(store, cid) == (0, 0)
    _record(store, cid, "d", "dead_end")
    seq = store.request_review(cid, "2 without a win", key="review#1")
    store.decide_review(cid, seq, "approve")
    assert streaks_from_store(store, cid) == (0, 0)  # an approved gate starts them again
    seq = store.request_review(cid, "approve the patch", key="patch:x#1")
    store.decide_review(cid, seq, "approve")
    _record(store, cid, "e", "dead_end")
    assert streaks_from_store(store, cid) == (1, 1)  # a patch gate does not
    store.record_fingerprint(cid, Fingerprint(gpu="g", cuda="12.8", gpu_count=8))
    store.record_fingerprint(cid, Fingerprint(gpu="g", cuda="13.0", gpu_count=8))
    assert streaks_from_store(store, cid) == (0, 0)  # nor does a changed environment
    assert experiments_recorded(store, cid) == 5
