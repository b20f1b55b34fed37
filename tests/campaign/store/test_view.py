"""view() and show_json() over a realistic campaign (the EAGLE-3 seed story, shortened)."""

from __future__ import annotations

import json

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import ConfigChange, EffectiveConfig, Failure, FailureClass, Fingerprint, LevelResult
from campaign.domain.records import LevelComparison, Verdict
from campaign.playbook.schema import HypothesisSpec
from campaign.store import Store

PLAYBOOK = {
    "name": "eagle-fast-verify",
    "description": "Make EAGLE-3 verify fast on 8 PCIe GPUs",
    "verdict": {"metric": "output_tokens_per_s"},
    "workloads": {"single_stream": {"concurrency": [1]}, "parallel": {"concurrency": [1, 10]}},
}
BASE = EffectiveConfig(flags={"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88})
SMALL_GRAPH = EffectiveConfig(flags={"cuda-graph-max-bs": 128, "mem-fraction-static": 0.88})
FP_12 = Fingerprint(gpu="RTX PRO 6000 Blackwell", gpu_count=8, arch="sm120", cuda="12.8", engine="sglang")
FP_13 = FP_12.model_copy(update={"cuda": "13.0"})


def lv(c: int, tps: float) -> LevelResult:
    return LevelResult(concurrency=c, requests=2 * c, output_tokens_per_s=tps)


def cmp(wl: str, c: int, base: float, cand: float, winner: str) -> LevelComparison:
    return LevelComparison(workload=wl, concurrency=c, baseline_mean=base, candidate_mean=cand,
                           delta_pct=(cand / base - 1) * 100, ci_low_pct=-1, ci_high_pct=1,
                           n_baseline=2, n_candidate=2, winner=winner)  # type: ignore[arg-type]  # fmt: skip


def measure(store: Store, exp_id: str, side: str, figures: dict[tuple[str, int], list[float]]) -> None:
    for (wl, c), values in figures.items():
        for rep, v in enumerate(values):
            store.record_run(exp_id, side, rep, wl, lv(c, v), work="ph", node="sim-0")  # type: ignore[arg-type]


@pytest.fixture()
def campaign(backend_db: str) -> tuple[Store, str, dict[str, str]]:
    store = Store(backend_db)
    cid = store.create_campaign("eagle-fast-verify", playbook=PLAYBOOK, node="sim-0", time_scale=20.0).id
    fp12 = store.record_fingerprint(cid, FP_12)
    specs = [
        HypothesisSpec(name="smaller-cuda-graph", rationale="frees KV memory", flags={"cuda-graph-max-bs": 128}, adopt_if_win=True),
        HypothesisSpec(name="flashinfer-allreduce-fusion", flags={"enable-flashinfer-allreduce-fusion": True}, revisit_on=["cuda"]),
        HypothesisSpec(name="nccl-fewer-channels", env={"NCCL_MAX_NCHANNELS": "2"}),
    ]  # fmt: skip
    for spec in specs:
        store.upsert_hypothesis(cid, spec)

    b1 = store.start_experiment(
        cid, "baseline", role="baseline", config=BASE, node="sim-0", fingerprint_id=fp12, reason="start"
    )
    measure(
        store,
        b1.id,
        "baseline",
        {("single_stream", 1): [82.0, 84.0], ("parallel", 1): [92.0, 93.0], ("parallel", 10): [457.0, 459.0]},
    )
    store.finish_experiment(b1.id, node_seconds=100.0)
    store.update_campaign(cid, baseline_experiment_id=b1.id)

    win = store.start_experiment(cid, "smaller-cuda-graph", config=SMALL_GRAPH, node="sim-0", fingerprint_id=fp12,
                                 baseline_ref=b1.id, command="python -m tools.simnode --cuda-graph-max-bs 128")  # fmt: skip
    measure(store, win.id, "candidate", {("single_stream", 1): [89.0, 90.0], ("parallel", 10): [470.0, 472.0]})
    measure(store, win.id, "baseline", {("single_stream", 1): [82.0, 83.0], ("parallel", 10): [458.0, 460.0]})
    store.record_verdict(win.id, Verdict(kind="win", reason="+8.4% single stream", headline_delta_pct=8.4,
                         levels=[cmp("single_stream", 1, 82.5, 89.5, "candidate"), cmp("parallel", 10, 459, 471, "candidate")]))  # fmt: skip
    store.record_artifact(win.id, "analysis", "Freed memory raised the KV capacity.")
    store.finish_experiment(win.id, node_seconds=200.0)
    store.set_adopted(win.id)
    store.set_hypothesis_status(cid, "smaller-cuda-graph", "done")

    b2 = store.start_experiment(cid, "baseline", role="baseline", config=SMALL_GRAPH, node="sim-0", fingerprint_id=fp12,
                                reason="adopted smaller-cuda-graph")  # fmt: skip
    measure(store, b2.id, "baseline", {("single_stream", 1): [89.0, 91.0], ("parallel", 10): [470.0, 474.0]})
    store.finish_experiment(b2.id, node_seconds=100.0)
    store.update_campaign(cid, baseline_experiment_id=b2.id)

    crash = store.start_experiment(cid, "flashinfer-allreduce-fusion", node="sim-0", fingerprint_id=fp12, baseline_ref=b2.id,
                                   config=EffectiveConfig(flags=SMALL_GRAPH.flags | {"enable-flashinfer-allreduce-fusion": True}))  # fmt: skip
    failure = Failure(failure_class=FailureClass.jit_error, summary="FlashInfer JIT: SM120 not supported",
                      evidence=["RuntimeError: no kernel image for sm_120"], exit_code=1)  # fmt: skip
    store.record_artifact(crash.id, "log_excerpt", "\n".join(failure.evidence))
    store.finish_experiment(crash.id, "failed", failure, node_seconds=30.0)
    store.record_verdict(crash.id, Verdict(kind="dead_end", reason="crashed at start: jit_error",
                                           failure_class=FailureClass.jit_error, revisit_on=["cuda"]))  # fmt: skip
    store.set_hypothesis_status(cid, "flashinfer-allreduce-fusion", "done")

    confounded = store.start_experiment(cid, "nccl-fewer-channels", node="sim-0", fingerprint_id=fp12, baseline_ref=b2.id,
                                        config=EffectiveConfig(flags={"cuda-graph-max-bs": 128, "mem-fraction-static": 0.80},
                                                               env={"NCCL_MAX_NCHANNELS": "2"}))  # fmt: skip
    measure(store, confounded.id, "candidate", {("single_stream", 1): [88.0, 92.0]})
    change = ConfigChange(kind="flag", key="mem-fraction-static", before=0.88, after=0.80, change="changed")
    store.record_verdict(confounded.id, Verdict(kind="inconclusive", reason="confounded by mem-fraction-static",
                                                confounded_by=[change]))  # fmt: skip
    store.finish_experiment(confounded.id, node_seconds=60.0)

    seq = store.request_review(cid, "2 dead ends in a row")
    store.decide_review(cid, seq, "approve", note="upgrade CUDA first")
    store.record_llm_call(cid, purpose="analysis", model="gpt-4o-mini", prompt_tokens=900, completion_tokens=120,
                          latency_ms=2500, prompt_hash="a1")  # fmt: skip
    store.add_event(cid, "drift", "baseline drifted +1.2% at single_stream C=1")
    store.record_fingerprint(cid, FP_13)  # CUDA upgrade: the JIT dead end is reopened
    store.update_campaign(cid, status="finished")
    return store, cid, {"b1": b1.id, "win": win.id, "b2": b2.id, "crash": crash.id, "confounded": confounded.id}


def test_view_assembles_baselines_experiments_and_dead_ends(campaign: tuple[Store, str, dict[str, str]]) -> None:
    store, cid, ids = campaign
    view = store.view(cid)
    assert (view.name, view.status, view.node, view.time_scale) == ("eagle-fast-verify", "finished", "sim-0", 20.0)
    assert view.description == PLAYBOOK["description"]
    assert view.baseline is not None and view.baseline.experiment_id == ids["b2"]
    assert view.baseline.reason == "adopted smaller-cuda-graph"
    assert view.baseline.figures == {"single_stream": {1: 90.0}, "parallel": {10: 472.0}}
    assert [b.experiment_id for b in view.baseline_history] == [ids["b1"], ids["b2"]]
    assert view.baseline_history[0].figures == {"single_stream": {1: 83.0}, "parallel": {1: 92.5, 10: 458.0}}

    win, crash, confounded = view.experiments
    assert [e.hypothesis for e in view.experiments] == [
        "smaller-cuda-graph",
        "flashinfer-allreduce-fusion",
        "nccl-fewer-channels",
    ]
    assert win.adopted and win.verdict is not None and win.verdict.kind == "win"
    assert (win.rationale, win.repeats, win.baseline_id, win.node_seconds) == ("frees KV memory", 2, ids["b1"], 200.0)
    assert [(r.workload, r.concurrency, r.baseline, r.candidate) for r in win.rows] == [
        ("single_stream", 1, 82.5, 89.5),  # interleaved baseline runs, not the baseline experiment's
        ("parallel", 10, 459.0, 471.0),
    ]
    assert win.rows[0].comparison is not None and win.rows[0].comparison.winner == "candidate"
    assert [(c.key, c.before, c.after, c.change) for c in win.config_diff] == [
        ("cuda-graph-max-bs", 512, 128, "changed")
    ]
    assert win.analysis == "Freed memory raised the KV capacity." and win.environment == FP_12
    assert win.command.startswith("python -m tools.simnode")

    assert crash.status == "failed" and crash.failure is not None
    assert crash.failure.failure_class == FailureClass.jit_error and crash.rows == []
    assert crash.config_diff[0].key == "enable-flashinfer-allreduce-fusion"

    assert confounded.verdict is not None and confounded.verdict.confounded_by[0].key == "mem-fraction-static"
    assert [(r.baseline, r.candidate) for r in confounded.rows] == [(90.0, 90.0)]  # baseline from b2 (no interleaving)
    assert {(c.kind, c.key) for c in confounded.config_diff} == {
        ("flag", "mem-fraction-static"),
        ("env", "NCCL_MAX_NCHANNELS"),
    }

    [dead] = view.dead_ends
    assert (dead.hypothesis, dead.experiment_id, dead.failure_class) == (
        "flashinfer-allreduce-fusion",
        ids["crash"],
        FailureClass.jit_error,
    )
    assert dead.revisit_on == ["cuda"] and dead.environment["cuda"] == "12.8" and dead.reopened
    assert view.environment == FP_13
    assert view.environment_changes == ["environment changed: cuda 12.8 -> 13.0"]
    assert view.drift_notes == ["baseline drifted +1.2% at single_stream C=1"]
    assert [(r.seq, r.decision, r.note) for r in view.reviews] == [(1, "approve", "upgrade CUDA first")]
    assert view.planner_cost["calls"] == 1 and view.planner_cost["seconds"] == 2.5
    assert view.node_seconds == 490.0


def test_dead_end_is_not_reopened_while_the_environment_is_unchanged(backend_db: str) -> None:
    store = Store(backend_db)
    cid = store.create_campaign("x", playbook=PLAYBOOK).id
    fp = store.record_fingerprint(cid, FP_12)
    exp = store.start_experiment(cid, "torch-symm-mem", config=BASE, fingerprint_id=fp)
    store.finish_experiment(exp.id, "failed", Failure(failure_class=FailureClass.unsupported_arch, summary="sm120"))
    store.record_verdict(exp.id, Verdict(kind="dead_end", reason="arch", failure_class=FailureClass.unsupported_arch,
                                         revisit_on=["engine_version"]))  # fmt: skip
    store.record_fingerprint(cid, FP_13)  # cuda moved, but the revisit condition names engine_version
    [dead] = store.dead_ends(cid)
    assert not dead.reopened and dead.revisit_on == ["engine_version"]


def test_show_json_has_the_documented_shape(campaign: tuple[Store, str, dict[str, str]]) -> None:
    store, cid, ids = campaign
    doc = store.show_json(cid)
    assert json.loads(json.dumps(doc)) == doc  # plain JSON, nothing lost
    assert {"id", "status", "baseline", "experiments"} <= set(doc)
    assert doc["id"] == cid and doc["status"] == "finished"
    assert doc["baseline"] == {
        "experiment_id": ids["b2"],
        "config": {"flags": {"cuda-graph-max-bs": 128, "mem-fraction-static": 0.88}, "env": {}},
        "figures": {"single_stream": {"1": 90.0}, "parallel": {"10": 472.0}},
    }
    win, crash, confounded = doc["experiments"]
    assert (win["hypothesis"], win["verdict"], win["attempt"], win["node"], win["adopted"]) == (
        "smaller-cuda-graph",
        "win",
        1,
        "sim-0",
        True,
    )
    single = win["metrics"]["single_stream"]["1"]
    assert single["candidate"] == 89.5 and single["baseline"] == 82.5
    assert single["delta_pct"] == pytest.approx((89.5 / 82.5 - 1) * 100)
    assert (crash["verdict"], crash["failure_class"], crash["metrics"]) == ("dead_end", "jit_error", {})
    assert crash["reason"] == "crashed at start: jit_error"
    assert confounded["verdict"] == "inconclusive" and confounded["failure_class"] is None
    assert confounded["metrics"]["single_stream"]["1"]["delta_pct"] == pytest.approx(0.0)


def test_running_campaign_without_measurements_and_unknown_id(backend_db: str) -> None:
    store = Store(backend_db)
    cid = store.create_campaign("x", playbook=PLAYBOOK).id
    exp = store.start_experiment(cid, "h", config=BASE)
    doc = store.show_json(cid)
    assert doc["baseline"] is None
    assert {"hypothesis", "verdict", "reason", "failure_class", "metrics", "attempt", "node"} <= set(
        doc["experiments"][0]
    )
    assert doc["experiments"][0]["verdict"] is None and doc["experiments"][0]["metrics"] == {}
    assert doc["experiments"][0]["id"] == exp.id and doc["experiments"][0]["status"] == "running"
    for call in (store.view, store.show_json, store.dead_ends):
        with pytest.raises(UserError) as err:
            call("no-such-campaign")
        assert "no-such-campaign" in str(err.value) and "campaign status" in str(err.value)


def test_an_incremental_view_parses_only_the_specs_it_shows(campaign: tuple[Store, str, dict[str, str]]) -> None:
    """The journal's per-verdict update reads the view with `detail`: it must show the same
    dead ends (a revisit list that only the hypothesis's spec holds included) and the
    re-rendered experiment's rationale, without parsing every other hypothesis's spec."""
    from campaign.store.db import driver_connection, read_session
    from campaign.store.snapshot import read_snapshot

    store, cid, ids = campaign
    store.upsert_hypothesis(
        cid, HypothesisSpec(name="custom-all-reduce", flags={"disable-custom-all-reduce": True}, revisit_on=["driver"])
    )
    dead = store.start_experiment(
        cid,
        "custom-all-reduce",
        node="sim-0",
        baseline_ref=ids["b2"],
        config=EffectiveConfig(flags=SMALL_GRAPH.flags | {"disable-custom-all-reduce": True}),
    )
    store.record_verdict(dead.id, Verdict(kind="dead_end", reason="slower: loses parallel at every C"))
    store.finish_experiment(dead.id, node_seconds=60.0)
    store.upsert_hypothesis(cid, HypothesisSpec(name="pending-idea", rationale="not run yet"))

    full, part = store.view(cid), store.view(cid, detail={ids["win"]})
    assert part.dead_ends == full.dead_ends
    assert [d.revisit_on for d in part.dead_ends if d.hypothesis == "custom-all-reduce"] == [["driver"]]
    assert next(e for e in part.experiments if e.id == ids["win"]).rationale == "frees KV memory"
    with read_session(store._engine) as s:
        parsed = {h.name for h in read_snapshot(driver_connection(s), cid, {ids["win"]}).hypotheses}
        everything = {h.name for h in read_snapshot(driver_connection(s), cid).hypotheses}
    assert parsed == {"smaller-cuda-graph", "flashinfer-allreduce-fusion", "custom-all-reduce"}
    assert everything == parsed | {"nccl-fewer-channels", "pending-idea"}


def test_a_repeated_view_decodes_each_record_once_and_shows_every_change(
    campaign: tuple[Store, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal re-reads the view after every verdict from the same Store: what it
    decoded before (experiment rows, outline verdicts) is reused, and a changed row is
    decoded again, never served stale."""
    import campaign.store.snapshot as snapshot

    store, cid, ids = campaign
    decoded = {"records": 0, "verdicts": 0}

    def counting(name: str, real):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            decoded[name] += 1
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(snapshot, "experiment_record", counting("records", snapshot.experiment_record))
    monkeypatch.setattr(snapshot, "light_verdict", counting("verdicts", snapshot.light_verdict))
    first = store.view(cid, detail={ids["win"]})
    assert decoded["records"] == len(store.list_experiments(cid)) and decoded["verdicts"] >= 1
    decoded.update(records=0, verdicts=0)
    again = store.view(cid, detail={ids["win"]})
    assert decoded == {"records": 0, "verdicts": 0}
    assert again == first

    store.set_adopted(ids["win"], False)
    later = store.view(cid, detail={ids["win"]})
    assert decoded["records"] == 1  # the changed row only
    assert not next(e for e in later.experiments if e.id == ids["win"]).adopted
    assert next(e for e in first.experiments if e.id == ids["win"]).adopted
    assert store.view(cid) == store.view(cid, detail=None)  # a full view is the same with or without reuse
    fresh = Store(store.location)
    try:
        assert fresh.view(cid, detail={ids["win"]}) == later  # what reuse gives is what decoding again gives
    finally:
        fresh.close()


def test_updated_is_when_the_campaign_last_recorded_something(backend_db: str) -> None:
    """The journal's "started / updated" read the campaign row's last status change: a
    vLLM CPU campaign 40 minutes into its experiments still said "updated" at its start."""
    import time

    store = Store(backend_db)
    cid = store.create_campaign("x", playbook=PLAYBOOK).id
    created = store.view(cid).updated_at
    time.sleep(0.02)
    exp = store.start_experiment(cid, "h", config=BASE)
    assert store.view(cid).updated_at == store.get_experiment(exp.id).started_at > created
    time.sleep(0.02)
    store.finish_experiment(exp.id, node_seconds=1.0)
    finished = store.get_experiment(exp.id).finished_at
    assert finished is not None and store.view(cid).updated_at == finished


def test_every_view_reads_the_campaign_node_time_from_the_loop_tally(
    campaign: tuple[Store, str, dict[str, str]], backend_db: str
) -> None:
    """One read of a campaign's node time: the whole view, a window's view and the loop's
    budget figure agree, kept or (a campaign the loop never counted) counted from the records."""
    from tests.pgdb import execute

    store, cid, ids = campaign
    assert store.recount_tally(cid).node_seconds == 490.0
    execute(backend_db, "DELETE FROM loop_tally")  # none kept: the views count from the records
    assert store.view(cid).node_seconds == store.view(cid, window=[ids["win"]]).node_seconds == 490.0
    assert store.loop_tally(cid).node_seconds == 490.0  # kept from here on
    execute(backend_db, "UPDATE loop_tally SET node_seconds = 7200")  # what the loop's budget reads
    assert store.view(cid).node_seconds == store.view(cid, window=[ids["win"]]).node_seconds == 7200.0
