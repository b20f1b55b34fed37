"""The change sequence: every write a journal section shows stamps its experiment, on a
real SQLite file, whatever code path wrote it; a schema-2 database gets it on open."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from bench import scale_build
from campaign.store import Store
from campaign.store.models import SCHEMA_VERSION
from tests.pgdb import execute


def _since(store: Store, cid: str, seq: int) -> tuple[set[str], int]:
    """Candidates stamped after `seq` (baselines are stamped too; their section is the
    campaign's, rendered every time)."""
    order, changed, latest = store.journal_changes(cid, seq)
    assert changed is not None
    return changed & set(order), latest


def test_each_write_a_section_shows_stamps_only_its_experiment(backend_db: str) -> None:
    db = backend_db  # SQLite's triggers and PostgreSQL's plpgsql ones
    cid = scale_build.build(db, 4)
    with Store(db) as store:
        order, everything, seq = store.journal_changes(cid, None)
        assert everything is None and len(order) == 4
        assert _since(store, cid, 0)[0] == set(order)  # every experiment was stamped once
        assert _since(store, cid, seq) == (set(), seq)  # nothing since
        first, second = order[0], order[1]

        store.set_adopted(first)
        changed, seq = _since(store, cid, seq)
        assert changed == {first}
        store.record_artifact(second, "analysis", "a later analysis", seq=7)
        changed, seq = _since(store, cid, seq)
        assert changed == {second}
        camp = store.get_campaign(cid)
        new, _ = scale_build.add_experiment(
            store, cid, random.Random(9), 9, store.snapshot(cid).latest_fingerprint_id, camp.baseline_experiment_id
        )
        changed, seq = _since(store, cid, seq)
        assert changed == {new}  # its row, runs and verdict; no other experiment
        assert store.journal_changes(cid, seq)[0][-1] == new

        hyp = store.get_experiment(first).hypothesis
        same = {e.id for e in store.list_experiments(cid, role="candidate") if e.hypothesis == hyp}
    # a writer that is not the Store: the triggers stamp it too
    execute(
        db,
        "UPDATE hypotheses SET spec_json = replace(spec_json, '\"rationale\":', '\"rationale\": ') "
        "WHERE campaign_id = ? AND name = ?",
        (cid, hyp),
    )  # a spec edited (its experiments' sections show it)
    with Store(db) as store:
        changed, seq = _since(store, cid, seq)
        assert changed == same and first in same
    execute(db, "UPDATE experiments SET node = 'elsewhere' WHERE id = ?", (second,))
    with Store(db) as store:
        changed, seq2 = _since(store, cid, seq)
        assert changed == {second} and seq2 > seq
        assert store.journal_changes(cid, seq2 + 5)[1] is None  # ahead of the database: start over


def test_a_schema_2_database_gets_the_change_sequence_on_open(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 3)
    with sqlite3.connect(db) as con:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            con.execute(f"DROP TRIGGER {name}")
        con.execute("DROP TABLE journal_changes")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with Store(db) as store:
        order, _, seq = store.journal_changes(cid, None)
        assert _since(store, cid, 0)[0] == set(order)
        store.set_adopted(order[1])
        assert _since(store, cid, seq)[0] == {order[1]}
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
