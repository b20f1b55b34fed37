"""The store port (`campaign.ports.store`): launch artifacts typed by (side, repeat) and
times as numbers, read the same from a database written before the port existed; and
a second, in-memory implementation of a port driving the code typed against it."""

from __future__ import annotations

from pathlib import Path

from campaign.domain.models import EffectiveConfig
from campaign.domain.records import Verdict
from campaign.loop.experiment import finish_recorded, reported_pairs
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.records import ExperimentRecord, HypothesisRecord, LaunchArtifact, LaunchTime
from campaign.store import Store
from campaign.verdict.stack_check import adopted_wins

PB = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}


def _experiment(tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PB, node="local").id
    return store, store.start_experiment(cid, "h", config=EffectiveConfig(flags={}, env={})).id


def test_launch_artifacts_come_back_by_side_and_repeat(tmp_path: Path) -> None:
    store, eid = _experiment(tmp_path)
    for repeat in (0, 1):
        for side in ("baseline", "candidate"):
            store.record_launch_artifact(eid, "command", f"serve {side} {repeat}", side=side, repeat=repeat)
    assert store.launch_artifacts(eid, "command") == [
        LaunchArtifact(kind="command", side=side, repeat=repeat, content=f"serve {side} {repeat}")
        for repeat in (0, 1)
        for side in ("baseline", "candidate")
    ]
    assert store.launch_artifact(eid, "command", side="candidate", repeat=1) == "serve candidate 1"
    assert store.launch_artifact(eid, "command", side="candidate", repeat=2) is None


def test_a_database_written_before_the_port_reads_back_typed(tmp_path: Path) -> None:
    """Rows keyed the old way (seq = 2 * repeat + side, times as text) are the same rows."""
    store, eid = _experiment(tmp_path)
    store.record_artifact(eid, "reported_config", '{"flags": {"a": 1}, "env": {}}', seq=2)
    store.record_artifact(eid, "reported_config", '{"flags": {"a": 2}, "env": {}}', seq=3)
    store.record_artifact(eid, "node_seconds", "10.250", seq=0)
    store.record_artifact(eid, "node_seconds", "30.500", seq=3)
    store.record_artifact(eid, "queue_seconds", "4.000", seq=3)
    assert store.launch_times(eid) == [
        LaunchTime(side="baseline", repeat=0, node_seconds=10.25),
        LaunchTime(side="candidate", repeat=1, node_seconds=30.5, queue_seconds=4.0),
    ]
    finish_recorded(store, eid)
    done = store.get_experiment(eid)
    assert (done.node_seconds, done.queue_seconds) == (40.75, 4.0)
    [(base, cand)] = reported_pairs(store, eid, None)
    assert (base.flags, cand.flags) == ({"a": 1}, {"a": 2})


def test_a_launch_time_is_written_as_numbers_and_idempotently(tmp_path: Path) -> None:
    store, eid = _experiment(tmp_path)
    t = LaunchTime(side="candidate", repeat=0, node_seconds=12.3456)
    store.record_launch_time(eid, t)
    store.record_launch_time(eid, t)  # a resumed node writes it again
    assert store.launch_times(eid) == [t.model_copy(update={"node_seconds": 12.346})]
    assert [k for k, _s, _c in store.list_artifacts(eid)] == ["node_seconds"]  # no queue wait: nothing recorded


class _History:
    """A `VerdictHistory` in memory: what the verdict package reads, nothing else."""

    def __init__(
        self, experiments: list[ExperimentRecord], verdicts: dict[str, Verdict], hypotheses: dict[str, HypothesisRecord]
    ) -> None:
        self._experiments, self._verdicts, self._hypotheses = experiments, verdicts, hypotheses

    def list_experiments(
        self, campaign_id: str, *, role: str | None = None, hypothesis: str | None = None, status: str | None = None
    ) -> list[ExperimentRecord]:
        return [
            e
            for e in self._experiments
            if e.campaign_id == campaign_id
            and role in (None, e.role)
            and hypothesis in (None, e.hypothesis)
            and status in (None, e.status)
        ]

    def get_verdict(self, experiment_id: str) -> Verdict | None:
        return self._verdicts.get(experiment_id)

    def get_hypothesis(self, campaign_id: str, name: str) -> HypothesisRecord | None:
        return self._hypotheses.get(name)


def test_the_stack_check_reads_its_wins_from_any_verdict_history(tmp_path: Path) -> None:
    """The same wins from the SQLite store and from an in-memory history of the same records."""
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=Playbook.model_validate(PB), node="local").id
    for name, delta, adopted in (("fast", 8.0, True), ("slow", -1.0, False), ("faster", 3.5, True)):
        store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags={name: 1}))
        e = store.start_experiment(cid, name, config=EffectiveConfig(flags={name: 1}, env={}))
        store.record_verdict(
            e.id, Verdict(kind="win" if adopted else "inconclusive", reason="-", headline_delta_pct=delta)
        )
        store.finish_experiment(e.id)
        if adopted:
            store.set_adopted(e.id)
    memory = _History(
        store.list_experiments(cid),
        {e.id: v for e in store.list_experiments(cid) if (v := store.get_verdict(e.id))},
        {h.name: h for h in store.list_hypotheses(cid)},
    )
    wins = adopted_wins(store, cid)
    assert [(n, d) for n, d, _ in wins] == [("fast", 8.0), ("faster", 3.5)]
    assert adopted_wins(memory, cid) == wins


def test_an_adopted_win_without_its_hypothesis_is_named(tmp_path: Path) -> None:
    """The port says `get_hypothesis` may return None: the stack check names the record
    that lacks it instead of failing on an attribute of None."""
    import pytest

    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PB, node="local").id
    store.upsert_hypothesis(cid, HypothesisSpec(name="fast", flags={"fast": 1}))
    e = store.start_experiment(cid, "fast", config=EffectiveConfig(flags={"fast": 1}, env={}))
    store.set_adopted(e.id)
    memory = _History(store.list_experiments(cid), {}, {})  # a history that lost the hypothesis
    with pytest.raises(LookupError, match=f"experiment {e.id}: its hypothesis 'fast' is not in the record"):
        adopted_wins(memory, cid)
