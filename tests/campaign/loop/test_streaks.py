"""The review policy's counters are kept with the record (`campaign.store.tally`), so a
crash that loses a node's state update cannot skew them, and they always equal a count
of the records from scratch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from campaign.domain.models import EffectiveConfig, Fingerprint
from campaign.domain.records import Verdict
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}
CAND = EffectiveConfig(flags={"cuda-graph-max-bs": 128}, env={})


def _record(store: Store, cid: str, name: str, kind: str, *, status: str = "finished") -> None:
    store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags={"cuda-graph-max-bs": 128}))
    exp = store.start_experiment(cid, name, config=CAND, attempt=1)
    store.record_verdict(exp.id, Verdict(kind=kind, reason=kind))
    store.finish_experiment(exp.id, status, None, node_seconds=1.0)


def _streaks(store: Store, cid: str) -> tuple[int, int]:
    t = store.loop_tally(cid)
    assert t == store.recount_tally(cid)  # kept == counted from the records
    return t.no_win, t.dead_end


def test_streaks_follow_the_record(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="sim-0").id
    assert _streaks(store, cid) == (0, 0)
    _record(store, cid, "a", "inconclusive")
    _record(store, cid, "b", "dead_end", status="failed")
    assert _streaks(store, cid) == (2, 1)
    _record(store, cid, "b", "dead_end", status="failed")  # a resumed node writes it again: nothing changes
    assert _streaks(store, cid) == (2, 1)
    _record(store, cid, "c", "win")
    assert _streaks(store, cid) == (0, 0)
    _record(store, cid, "d", "dead_end")
    seq = store.request_review(cid, "2 without a win", key="review#1")
    store.decide_review(cid, seq, "approve")
    store.decide_review(cid, seq, "approve")  # decided again by a resumed node
    assert _streaks(store, cid) == (0, 0)  # an approved gate starts them again
    seq = store.request_review(cid, "approve the patch", key="patch:x#1")
    store.decide_review(cid, seq, "approve")
    _record(store, cid, "e", "dead_end")
    assert _streaks(store, cid) == (1, 1)  # a patch gate does not
    store.record_fingerprint(cid, Fingerprint(gpu="g", cuda="12.8", gpu_count=8))
    store.record_fingerprint(cid, Fingerprint(gpu="g", cuda="13.0", gpu_count=8))
    assert _streaks(store, cid) == (0, 0)  # nor does a changed environment
    _record(store, cid, "f", "dead_end")
    assert _streaks(store, cid) == (1, 1)
    store.upsert_hypothesis(cid, HypothesisSpec(name="g", flags={"cuda-graph-max-bs": 128}))
    late = store.start_experiment(cid, "g", config=CAND, attempt=1)
    store.finish_experiment(late.id, "failed", None, node_seconds=0.0)
    assert _streaks(store, cid) == (1, 1)  # no verdict yet: not an idea judged
    store.record_verdict(late.id, Verdict(kind="dead_end", reason="decided after it was final"))
    assert _streaks(store, cid) == (2, 2)
    t = store.loop_tally(cid)
    assert (t.experiments_done, t.node_seconds) == (7, 6.0)


def test_a_database_without_kept_counts_is_counted_once_and_then_kept(tmp_path: Path) -> None:
    """A campaign recorded before the counts were kept (no `loop_tally` table) gets them
    from its records; every later write keeps them."""
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="sim-0").id
    _record(store, cid, "a", "dead_end")
    _record(store, cid, "b", "inconclusive")
    with sqlite3.connect(tmp_path / "c.db") as con:
        con.execute("DROP TABLE loop_tally")
    _record(store, cid, "c", "dead_end")  # the first write after: counted from the records, this one included
    assert _streaks(store, cid) == (3, 2)
    with sqlite3.connect(tmp_path / "c.db") as con:
        con.execute("DELETE FROM loop_tally")
    assert _streaks(store, cid) == (3, 2)  # a read counts them too
    _record(store, cid, "d", "win")
    assert _streaks(store, cid) == (0, 0)
    assert store.loop_tally(cid).experiments_done == 4
