"""Writes are idempotent upserts; finished records are immutable; stale experiments are set apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig, Failure, FailureClass, Fingerprint, LevelResult
from campaign.domain.records import LevelComparison, Verdict
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store
from campaign.store.facade import ImmutableRecordError
from tests.pgdb import scalar

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}, "parallel": {"concurrency": [1, 10]}}}
BASE = EffectiveConfig(flags={"cuda-graph-max-bs": 512}, env={})
CAND = EffectiveConfig(flags={"cuda-graph-max-bs": 128}, env={})


def level(c: int, tps: float) -> LevelResult:
    return LevelResult(concurrency=c, requests=2 * c, output_tokens=512 * c, output_tokens_per_s=tps)


def count(db: Path | str, table: str) -> int:
    return int(str(scalar(db, f"SELECT count(*) FROM {table}")))


@pytest.fixture()
def db(backend_db: str) -> Path | str:
    """Every contract here holds on SQLite and on PostgreSQL."""
    return Path(backend_db) if "://" not in backend_db else backend_db


@pytest.fixture()
def store(db: Path) -> Store:
    return Store(db)


@pytest.fixture()
def cid(store: Store) -> str:
    return store.create_campaign("demo", playbook=PLAYBOOK, node="sim-0").id


def test_every_write_twice_gives_one_row(store: Store, db: Path, cid: str) -> None:
    spec = HypothesisSpec(name="smaller-cuda-graph", flags={"cuda-graph-max-bs": 128})
    fp = Fingerprint(gpu="RTX PRO 6000", cuda="12.8", gpu_count=8)
    verdict = Verdict(kind="win", reason="faster at every level")
    failure = Failure(failure_class=FailureClass.oom, summary="CUDA out of memory")
    for _ in range(2):
        store.create_campaign("demo", playbook=PLAYBOOK, campaign_id=cid)
        store.upsert_hypothesis(cid, spec)
        store.record_fingerprint(cid, fp)
        exp = store.start_experiment(cid, spec.name, config=CAND, attempt=1)
        store.record_run(exp.id, "candidate", 0, "single_stream", level(1, 90.0))
        store.record_run(exp.id, "baseline", 0, "single_stream", level(1, 82.0))
        store.record_artifact(exp.id, "log_excerpt", "line 1\nline 2")
        store.record_verdict(exp.id, verdict)
        store.finish_experiment(exp.id, "failed", failure, node_seconds=12.5)
        seq = store.request_review(cid, "before patch")
        store.decide_review(cid, seq, "approve", note="go", added=[HypothesisSpec(name="extra", env={"A": "1"})])
        store.record_llm_call(cid, purpose="propose", model="m", prompt_tokens=10, completion_tokens=5,
                              latency_ms=300, prompt_hash="h1", output={"name": "x"})  # fmt: skip
        store.add_event(cid, "drift", "baseline drifted 3% at C=1")
    expected = {"campaigns": 1, "hypotheses": 2, "fingerprints": 1, "experiments": 1, "run_sides": 2, "artifacts": 1,
                "verdicts": 1, "reviews": 1, "llm_calls": 1, "events": 1}  # fmt: skip
    assert {t: count(db, t) for t in expected} == expected


def test_start_experiment_resumes_the_running_one_and_numbers_new_attempts(store: Store, cid: str) -> None:
    first = store.start_experiment(cid, "eagle3", config=CAND, node="sim-0")
    assert (first.attempt, first.id, first.status) == (1, f"{cid}.eagle3.1", "running")
    assert store.start_experiment(cid, "eagle3", config=CAND).id == first.id  # resumed node: same experiment
    store.finish_experiment(first.id, "failed", Failure(failure_class=FailureClass.port_in_use, summary="port busy"))
    second = store.start_experiment(cid, "eagle3", config=CAND)
    assert second.attempt == 2
    assert [e.attempt for e in store.list_experiments(cid, hypothesis="eagle3")] == [1, 2]


def test_finished_experiment_is_immutable(store: Store, cid: str) -> None:
    exp = store.start_experiment(cid, "h", config=CAND)
    done = store.finish_experiment(exp.id, "finished", node_seconds=40.0)
    assert done.finished_at is not None
    again = store.finish_experiment(exp.id, "finished", node_seconds=40.0)
    assert again.finished_at == done.finished_at
    with pytest.raises(ImmutableRecordError):
        store.finish_experiment(exp.id, "finished", node_seconds=41.0)
    with pytest.raises(ImmutableRecordError):
        store.finish_experiment(exp.id, "failed", Failure(failure_class=FailureClass.oom, summary="oom"), 40.0)
    with pytest.raises(ImmutableRecordError):
        store.record_run(exp.id, "candidate", 0, "single_stream", level(1, 1.0))
    with pytest.raises(ImmutableRecordError):
        store.annotate_experiment(exp.id, command="python -m other")
    assert store.get_experiment(exp.id).status == "finished"


def test_runs_keep_the_first_measurement_while_running(store: Store, db: Path, cid: str) -> None:
    exp = store.start_experiment(cid, "h", config=CAND)
    assert store.record_run(exp.id, "candidate", 0, "parallel", level(10, 400.0), work="p", node="sim-0")
    assert not store.record_run(exp.id, "candidate", 0, "parallel", level(10, 401.0))  # re-run node: noise, kept first
    assert store.record_run(exp.id, "candidate", 1, "parallel", level(10, 402.0))
    runs = store.runs_for(exp.id)
    assert [(r.repeat, r.result.output_tokens_per_s, r.work) for r in runs] == [(0, 400.0, "p"), (1, 402.0, "")]
    assert count(db, "run_sides") == 2  # one packed row per side and round


def test_verdict_is_final_and_artifacts_replace_only_while_running(store: Store, cid: str) -> None:
    exp = store.start_experiment(cid, "h", config=CAND)
    assert store.record_artifact(exp.id, "log_excerpt", "first")
    assert store.record_artifact(exp.id, "log_excerpt", "second")
    assert store.record_artifact(exp.id, "log_excerpt", "other part", seq=1)
    v = Verdict(kind="inconclusive", reason="within noise")
    assert store.record_verdict(exp.id, v)
    assert not store.record_verdict(exp.id, v.model_copy())
    with pytest.raises(ImmutableRecordError):
        store.record_verdict(exp.id, Verdict(kind="win", reason="changed my mind"))
    store.finish_experiment(exp.id)
    assert not store.record_artifact(exp.id, "log_excerpt", "second")
    with pytest.raises(ImmutableRecordError):
        store.record_artifact(exp.id, "log_excerpt", "rewritten")
    assert store.record_artifact(exp.id, "analysis", "written after the verdict")
    assert store.get_artifact(exp.id, "log_excerpt") == "second"
    assert [k for k, _, _ in store.list_artifacts(exp.id)] == ["analysis", "log_excerpt", "log_excerpt"]
    assert store.get_verdict(exp.id) == v
    with pytest.raises(ValueError):
        store.record_artifact(exp.id, "screenshot", "x")  # type: ignore[arg-type]


def test_stale_experiments_are_excluded_from_verdict_samples(store: Store, cid: str) -> None:
    base = store.start_experiment(cid, "baseline", role="baseline", config=BASE, reason="start")
    store.record_run(base.id, "baseline", 0, "single_stream", level(1, 82.0))
    crashed = store.start_experiment(cid, "h", config=CAND, baseline_ref=base.id)
    store.record_run(crashed.id, "candidate", 0, "single_stream", level(1, 999.0))
    assert sorted(store.mark_stale_experiments(cid)) == sorted([base.id, crashed.id])
    assert store.mark_stale_experiments(cid) == []
    assert store.get_experiment(crashed.id).status == "stale"
    assert len(store.runs_for(crashed.id)) == 1  # kept for the record
    with pytest.raises(ImmutableRecordError):
        store.record_verdict(crashed.id, Verdict(kind="win", reason="x"))
    with pytest.raises(ImmutableRecordError):
        store.finish_experiment(crashed.id)
    rerun = store.start_experiment(cid, "h", config=CAND, baseline_ref=base.id)
    assert rerun.attempt == 2
    store.record_run(rerun.id, "candidate", 0, "single_stream", level(1, 90.0))
    samples = store.level_samples(rerun.id)
    assert [(s.workload, s.concurrency) for s in samples] == [("single_stream", 1)]
    assert [r.output_tokens_per_s for r in samples[0].candidate] == [90.0]
    assert samples[0].baseline == []  # the stale baseline's runs never feed a verdict


def test_level_samples_group_interleaved_or_referenced_baseline(store: Store, cid: str) -> None:
    base = store.start_experiment(cid, "baseline", role="baseline", config=BASE)
    for rep, tps in enumerate([82.0, 83.0]):
        store.record_run(base.id, "baseline", rep, "single_stream", level(1, tps))
    store.finish_experiment(base.id)
    referenced = store.start_experiment(cid, "a", config=CAND, baseline_ref=base.id)
    store.record_run(referenced.id, "candidate", 0, "single_stream", level(1, 90.0))
    assert [r.output_tokens_per_s for r in store.level_samples(referenced.id)[0].baseline] == [82.0, 83.0]
    interleaved = store.start_experiment(cid, "b", config=CAND, baseline_ref=base.id)
    for rep in range(2):
        store.record_run(interleaved.id, "candidate", rep, "parallel", level(10, 500.0 + rep))
        store.record_run(interleaved.id, "baseline", rep, "parallel", level(10, 450.0 + rep))
        store.record_run(interleaved.id, "candidate", rep, "parallel", level(1, 90.0 + rep))
    samples = store.level_samples(interleaved.id)
    assert [(s.workload, s.concurrency, len(s.candidate), len(s.baseline)) for s in samples] == [
        ("parallel", 1, 2, 0),
        ("parallel", 10, 2, 2),
    ]
    assert [r.output_tokens_per_s for r in samples[1].baseline] == [450.0, 451.0]


def test_hypothesis_queue_status_and_reopen(store: Store, cid: str) -> None:
    for name in ["a", "b", "c"]:
        store.upsert_hypothesis(cid, HypothesisSpec(name=name))
    store.upsert_hypothesis(cid, HypothesisSpec(name="first", rationale="llm idea"), source="llm", position=-1)
    assert [h.name for h in store.list_hypotheses(cid)] == ["first", "a", "b", "c"]
    assert store.next_queued_hypothesis(cid).name == "first"  # type: ignore[union-attr]
    store.set_hypothesis_status(cid, "first", "rejected", rejection_reason="unsafe flag")
    store.set_hypothesis_status(cid, "a", "done")
    assert store.next_queued_hypothesis(cid).name == "b"  # type: ignore[union-attr]
    store.upsert_hypothesis(cid, HypothesisSpec(name="a", flags={"x": 1}))  # ran already: spec kept
    assert store.get_hypothesis(cid, "a").spec.flags == {}  # type: ignore[union-attr]
    store.upsert_hypothesis(cid, HypothesisSpec(name="b", flags={"x": 2}))  # still queued: spec refreshed
    assert store.get_hypothesis(cid, "b").spec.flags == {"x": 2}  # type: ignore[union-attr]
    assert store.reopen_hypothesis(cid, "a") and not store.reopen_hypothesis(cid, "a")
    a = store.get_hypothesis(cid, "a")
    assert a is not None and (a.status, a.source, a.reopen_count) == ("queued", "reopened", 1)
    assert store.get_hypothesis(cid, "first").rejection_reason == "unsafe flag"  # type: ignore[union-attr]
    with pytest.raises(UserError, match="no hypothesis named 'zzz'"):
        store.set_hypothesis_status(cid, "zzz", "done")


def test_fingerprint_history_and_environment_events(store: Store, cid: str) -> None:
    fp12 = Fingerprint(gpu="RTX PRO 6000", cuda="12.8", driver="570")
    fp13 = fp12.model_copy(update={"cuda": "13.0"})
    id12 = store.record_fingerprint(cid, fp12)
    assert store.record_fingerprint(cid, fp12) == id12
    id13 = store.record_fingerprint(cid, fp13)
    assert id13 != id12 and store.latest_fingerprint(cid) == fp13
    store.record_fingerprint(cid, fp12)  # rolled back: latest again, one row per environment
    assert store.latest_fingerprint(cid) == fp12
    assert store.get_fingerprint(cid, id13) == fp13
    assert [e.message for e in store.events(cid, "environment")] == [
        "environment changed: cuda 12.8 -> 13.0",
        "environment changed: cuda 13.0 -> 12.8",
    ]


def test_reviews_are_keyed_by_seq_and_decisions_are_final(store: Store, cid: str) -> None:
    s1 = store.request_review(cid, "3 dead ends in a row")
    assert store.request_review(cid, "3 dead ends in a row") == s1
    assert store.list_reviews(cid)[0].key == "3 dead ends in a row"
    assert store.pending_review(cid).seq == s1  # type: ignore[union-attr]
    decided = store.decide_review(cid, s1, "approve", note="try NCCL", overrides={"budget": {"max_experiments": 30}},
                                  added=[HypothesisSpec(name="nccl-ll128", env={"NCCL_PROTO": "LL128"})])  # fmt: skip
    assert decided.decision == "approve" and decided.decided_at is not None
    assert store.pending_review(cid) is None
    assert store.get_campaign(cid).overrides == {"budget": {"max_experiments": 30}}
    added = store.get_hypothesis(cid, "nccl-ll128")
    assert added is not None and added.source == "review" and added.status == "queued"
    with pytest.raises(UserError, match="already decided"):
        store.decide_review(cid, s1, "reject")
    with pytest.raises(UserError, match="review 9 does not exist"):
        store.decide_review(cid, 9, "approve")
    assert store.request_review(cid, "3 dead ends in a row") == s1  # the re-run gate node: same review
    assert store.request_review(cid, "3 dead ends in a row", key="dead-ends@9") == s1 + 1  # a later gate


def test_update_campaign_fields_and_unknown_ids(store: Store, cid: str) -> None:
    c = store.update_campaign(cid, status="awaiting_review", halt_reason="before patch")
    assert (c.status, c.halt_reason) == ("awaiting_review", "before patch")
    c = store.update_campaign(cid, status="running", halt_reason=None, baseline_experiment_id="b1")
    assert (c.status, c.halt_reason, c.baseline_experiment_id) == ("running", None, "b1")
    assert store.update_campaign(cid, node="sim-1").halt_reason is None  # unspecified: unchanged
    other = store.create_campaign("other", playbook=PLAYBOOK)
    assert [x.id for x in store.list_campaigns()] == [other.id, cid]
    assert [x.id for x in store.list_campaigns(name="demo")] == [cid]
    with pytest.raises(UserError, match=r"campaign nope: .*campaign status"):
        store.get_campaign("nope")
    with pytest.raises(UserError, match="campaign nope"):
        store.start_experiment("nope", "h", config=CAND)
    with pytest.raises(UserError, match="experiment nope"):
        store.get_experiment("nope")


def test_llm_calls_are_summed_into_planner_cost(store: Store, cid: str) -> None:
    for attempt, rejection in enumerate([None, "flag not in knob space"]):
        store.record_llm_call(cid, purpose="propose", model="m", prompt_tokens=100, completion_tokens=20,
                              latency_ms=1500, prompt_hash="abc", attempt=attempt, rejection=rejection)  # fmt: skip
    assert not store.record_llm_call(cid, purpose="propose", model="m", prompt_tokens=100, completion_tokens=20,
                                     latency_ms=1500, prompt_hash="abc", attempt=1)  # fmt: skip
    assert store.planner_cost(cid) == {"calls": 2.0, "prompt_tokens": 200.0, "completion_tokens": 40.0,
                                       "seconds": 3.0, "rejections": 1.0}  # fmt: skip


def test_level_comparison_round_trips_through_the_verdict(store: Store, cid: str) -> None:
    exp = store.start_experiment(cid, "h", config=CAND)
    lc = LevelComparison(workload="parallel", concurrency=10, baseline_mean=450, candidate_mean=500, delta_pct=11.1,
                         ci_low_pct=9.0, ci_high_pct=13.0, n_baseline=2, n_candidate=2, winner="candidate")  # fmt: skip
    v = Verdict(kind="win", reason="+11%", levels=[lc], regimes={"parallel": "candidate"}, headline_delta_pct=11.1)
    store.record_verdict(exp.id, v)
    assert store.get_verdict(exp.id) == v
