"""The scheduler-queue budget (`max_queue_hours`): `record` reads the campaign's queue
hours from the store's running tally (one row), not by summing every experiment's
launches after every verdict (quadratic over a campaign); the tally equals the records
after a resumed node and on a database written before it kept queue seconds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from bench import scale_build
from bench.scale_loop import BenchNode, decided, start_state
from campaign.loop.deps import Deps
from campaign.loop.nodes import Nodes
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.store import Store
from campaign.store.models import SCHEMA_VERSION
from tests.pgdb import execute, scalar

QUEUE_S = 30.0  # what BenchNode reports each launch waited for its allocation


class _Counting:
    """The store, counting the calls the loop makes on it."""

    def __init__(self, store: Store) -> None:
        self.store, self.calls = store, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return call


def _decided(store: Store, cid: str, pb: Playbook) -> tuple[Nodes, _Counting, dict[str, Any]]:
    """One more hypothesis through propose .. verdict on the built campaign; `record` is next."""
    store.upsert_hypothesis(cid, HypothesisSpec(name="queued", flags={"queued-knob": 1}))
    counted = _Counting(store)
    nodes = Nodes(Deps(playbook=pb, store=counted, nodes=[BenchNode(seed=1)], journal_path=None))  # type: ignore[arg-type]
    return nodes, counted, decided(nodes, start_state(store, cid), pb.verdict.repeats.max)


def test_record_reads_the_queue_hours_without_reading_every_experiment(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    cid = scale_build.build(db, 12)
    launches = 2 * Playbook.model_validate(scale_build.PLAYBOOK).verdict.repeats.max  # at most, both sides
    with Store(db) as store:
        before = sum(t.queue_seconds for e in store.list_experiments(cid) for t in store.launch_times(e.id))
        pb = Playbook.model_validate({**scale_build.PLAYBOOK, "budget": {"max_queue_hours": (before + 1) / 3600}})
        nodes, counted, state = _decided(store, cid, pb)
        counted.calls.clear()
        update = nodes.record(state)  # type: ignore[arg-type]
        assert counted.calls["launch_times"] <= 1, counted.calls  # this experiment's, to finish it
        assert counted.calls["list_experiments"] == 0, counted.calls
        done = store.list_experiments(cid)[-1]
        assert done.hypothesis == "queued" and 0 < done.queue_seconds <= launches * QUEUE_S
        kept = store.loop_tally(cid)
        assert kept.queue_seconds == before + done.queue_seconds
        assert kept == store.recount_tally(cid)
        halt = update.get("halt") or {}
        assert "max_queue_hours" in halt.get("reason", ""), update  # the wait just spent crossed the budget

        again = nodes.record({**state, "halt": None})  # type: ignore[arg-type]  # a resumed node runs it again
        assert store.loop_tally(cid) == kept == store.recount_tally(cid)
        assert again.get("halt") == halt


def test_a_schema_3_database_gets_its_queue_seconds_from_the_launches(backend_db: str) -> None:
    """Before schema 4 an experiment's queue seconds lived only in its launches'
    artifacts: opening the database sums them onto its row, and the kept tally is
    counted again with them."""
    cid = scale_build.build(backend_db, 4)
    with Store(backend_db) as store:
        waited = [e for e in store.list_experiments(cid) if e.status == "finished"][:2]
        for i, exp in enumerate(waited):
            for seq in (0, 1):
                store.record_artifact(exp.id, "queue_seconds", f"{10 * (i + 1) + seq}.250", seq=seq)
        store.loop_tally(cid)  # kept, without them
    execute(backend_db, "ALTER TABLE experiments DROP COLUMN queue_seconds")
    execute(backend_db, "ALTER TABLE loop_tally DROP COLUMN queue_seconds")
    execute(backend_db, "UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    with Store(backend_db) as store:
        by_id = {e.id: e.queue_seconds for e in store.list_experiments(cid)}
        assert [by_id[e.id] for e in waited] == [21.5, 41.5]
        assert sum(by_id.values()) == 63.0
        assert store.loop_tally(cid).queue_seconds == 63.0
        assert store.loop_tally(cid) == store.recount_tally(cid)
    assert scalar(backend_db, "SELECT value FROM meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION)
    with Store(backend_db) as store:  # opened again: nothing to migrate, nothing changed
        assert store.loop_tally(cid).queue_seconds == 63.0
