"""`show --json` from stored text: the same bytes as the document built from the records, never stale."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

from bench import scale_build
from campaign.domain.models import EffectiveConfig
from campaign.store import Store
from campaign.store.quick import SCHEMA_VERSION
from campaign.store.showcache import cached_pieces

ROOT = Path(__file__).resolve().parents[3]


def _built(store: Store, cid: str) -> str:
    return json.dumps(store.show_json(cid), indent=2, default=str)


def _cached(db: Path, cid: str) -> str | None:
    conn = sqlite3.connect(db)
    try:
        doc = cached_pieces(conn, cid)
        return None if doc is None else "".join(doc)
    finally:
        conn.close()


def test_the_cache_serves_the_built_document_and_follows_every_change(tmp_path: Path) -> None:
    sb = scale_build
    db = tmp_path / "campaign.db"
    cid = sb.build(db, 6)
    rng = random.Random(5)
    with Store(db) as store:
        assert _cached(db, cid) is None  # nothing stored yet
        store.refresh_show_cache(cid)
        assert _cached(db, cid) == _built(store, cid)

        # a new experiment: the stored document is stale until it is refreshed
        baseline = store.get_campaign(cid).baseline_experiment_id
        fp = store.get_experiment(baseline).fingerprint_id
        exp_id, _ = sb.add_experiment(store, cid, rng, 7, fp, baseline)
        assert _cached(db, cid) is None
        assert "".join(store.show_json_text(cid)) == _built(store, cid)  # the full path stores what it built
        assert _cached(db, cid) == _built(store, cid)

        # a decision after the verdict (adopting a win) changes an old experiment's text
        store.set_adopted(exp_id, True)
        assert _cached(db, cid) is None
        store.refresh_show_cache(cid)
        assert json.loads(_cached(db, cid) or "null")["experiments"][-1]["adopted"] is True

        # a campaign-level change (status, halt reason) changes the head
        store.update_campaign(cid, status="awaiting_review", halt_reason="review gate")
        assert _cached(db, cid) is None
        store.refresh_show_cache(cid)
        assert json.loads(_cached(db, cid) or "null")["halt_reason"] == "review gate"
        assert _cached(db, cid) == _built(store, cid)


def test_a_borrowed_baseline_that_goes_stale_is_not_served_from_the_cache(tmp_path: Path) -> None:
    """A candidate without interleaved rounds shows its baseline's figures; when that
    baseline is marked stale (its process died) the figures go, and so must the text."""
    sb = scale_build
    db = tmp_path / "campaign.db"
    cid = sb.build(db, 1)
    rng = random.Random(1)
    with Store(db) as store:
        fp = store.get_experiment(store.get_campaign(cid).baseline_experiment_id).fingerprint_id
        running = store.start_experiment(
            cid,
            "baseline",
            role="baseline",
            config=EffectiveConfig(flags={"tp": 8}),
            node="gpu-node-1",
            fingerprint_id=fp,
            reason="re-measure",
        )
        sb._side(store, rng, running.id, "baseline", 0, 1.0)
        store.upsert_hypothesis(cid, sb.HypothesisSpec(name="solo", flags={"x": 1}))
        solo = store.start_experiment(
            cid,
            "solo",
            config=EffectiveConfig(flags={"tp": 8, "x": 1}),
            node="gpu-node-1",
            fingerprint_id=fp,
            baseline_ref=running.id,
        )
        sb._side(store, rng, solo.id, "candidate", 0, 1.02)
        store.finish_experiment(solo.id, node_seconds=10.0)
        store.refresh_show_cache(cid)
        before = json.loads(_cached(db, cid) or "null")["experiments"][-1]["metrics"]
        assert before["parallel"]["1"]["baseline"] is not None

        # a second borrower once the head is stored: its piece is built from its own
        # records and the baseline it borrows, not from the campaign's outline
        duo = store.start_experiment(
            cid,
            "solo",
            config=EffectiveConfig(flags={"tp": 8, "x": 1}),
            node="gpu-node-1",
            fingerprint_id=fp,
            baseline_ref=running.id,
        )
        sb._side(store, rng, duo.id, "candidate", 0, 1.03)
        store.finish_experiment(duo.id, node_seconds=10.0)
        store.refresh_show_cache(cid)
        assert _cached(db, cid) == _built(store, cid)
        assert (
            json.loads(_cached(db, cid) or "null")["experiments"][-1]["metrics"]["parallel"]["1"]["baseline"]
            == before["parallel"]["1"]["baseline"]
        )
        store.mark_stale_experiments(cid, keep=(solo.id,))
        assert _cached(db, cid) is None
        store.refresh_show_cache(cid)  # the refresh after a verdict: the borrowers of a written baseline too
        assert _cached(db, cid) == _built(store, cid)
        assert "".join(store.show_json_text(cid)) == _built(store, cid)
        after = json.loads(_cached(db, cid) or "null")["experiments"][-1]["metrics"]
        assert after["parallel"]["1"]["baseline"] is None


def test_campaign_show_json_answers_from_the_cache_without_sqlmodel(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 4)
    with Store(db) as store:
        built = _built(store, cid)
    probe = (
        "import sys, io; from campaign.cli import entry; out = io.StringIO(); sys.stdout, real = out, sys.stdout; "
        f"ok = entry._quick_show({cid!r}, {str(db)!r}); sys.stdout = real; "
        "print(ok, 'sqlmodel' in sys.modules, len(out.getvalue()))"
    )
    cold = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert cold.stdout.split() == ["False", "False", "0"]  # nothing stored yet: the full path answers
    full = subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", "show", cid, "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert full.stdout == built + "\n"
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert warm.stdout.split() == ["True", "False", str(len(built) + 1)]
    again = subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", "show", cid, "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert again.stdout == full.stdout
    with sqlite3.connect(db) as conn:  # the cache is not a record: dropping it loses nothing
        conn.execute("DROP TABLE show_cache")
    dropped = subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", "show", cid, "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert dropped.stdout == full.stdout


def test_an_unknown_campaign_or_an_older_schema_is_left_to_the_full_path(tmp_path: Path) -> None:
    from campaign.store.showcache import quick_show

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 2)
    with Store(db) as store:
        store.refresh_show_cache(cid)
    out = _Sink()
    assert quick_show(db, "nope", SCHEMA_VERSION, out) is False and out.text == ""
    assert quick_show(db, cid, "1", out) is False and out.text == ""
    assert quick_show(tmp_path / "missing.db", cid, SCHEMA_VERSION, out) is False
    assert quick_show(db, cid, SCHEMA_VERSION, out) is True and json.loads(out.text)["id"] == cid
    bad = subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", "show", "nope", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "nope" in bad.stderr + bad.stdout


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> None:
        self.text += s


def test_side_values_give_the_noise_model_the_same_launches_as_the_full_runs(tmp_path: Path) -> None:
    """The noise model reads every launch of the campaign before each decision; its cheap
    read (`Store.side_values`) must give exactly what the full level results give."""
    from campaign.loop.experiment import tables_of

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 6)
    with Store(db) as store:
        ids = [e.id for e in store.list_experiments(cid)]
        for side in ("baseline", "candidate"):
            bulk = store.side_values(ids, "output_tokens_per_s", side)
            for i in ids:
                full: dict[str, dict[int, dict[int, float]]] = {}
                for r in store.runs_for(i, side):
                    full.setdefault(r.workload, {}).setdefault(r.repeat, {})[r.concurrency] = (
                        r.result.output_tokens_per_s
                    )
                want = {w: [[row[c] for c in sorted(row)] for _, row in sorted(by.items())] for w, by in full.items()}
                assert tables_of(bulk[i]) == want
        assert any(bulk[i] for i in ids) and store.side_values([], "output_tokens_per_s") == {}


def test_the_refresh_after_a_verdict_looks_only_at_what_changed(tmp_path: Path, monkeypatch) -> None:
    """The loop refreshes after every verdict: at 5,000 experiments a digest of each was
    0.2 s a verdict.  The change sequence names the experiments written since."""
    from campaign.store import showcache

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 8)
    seen: list[int] = []
    real = showcache.digests

    def digests(conn, campaign_id, only=None):  # type: ignore[no-untyped-def]
        got = real(conn, campaign_id, only)
        seen.append(len(got or {}) - 1)
        return got

    monkeypatch.setattr("campaign.store.show.digests", digests)
    with Store(db) as store:
        store.refresh_show_cache(cid)
        assert seen == [8]  # the first refresh: every piece
        baseline = store.get_campaign(cid).baseline_experiment_id
        exp_id, _ = scale_build.add_experiment(
            store, cid, random.Random(3), 9, store.get_experiment(baseline).fingerprint_id, baseline
        )
        store.refresh_show_cache(cid)
        assert seen[-1] == 1
        store.refresh_show_cache(cid)
        assert seen[-1] == 0
        assert _cached(db, cid) == _built(store, cid)


def test_campaign_show_prints_the_stored_document(tmp_path: Path) -> None:
    """`campaign show ID` reads the same stored pieces as `--json` (building the view of
    every experiment took seconds at 1,000), from plain sqlite3 once they are stored: its
    lines are the same whether the pieces are stored already or not."""
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 4)
    with Store(db) as store:
        built = json.loads(_built(store, cid))
    cmd = [sys.executable, "-m", "campaign.cli.entry", "show", cid, "--db", str(db)]
    env = {**os.environ, "COLUMNS": "200"}
    cold = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True, env=env).stdout
    assert _cached(db, cid) is not None  # the first one stored the pieces
    probe = (
        "import sys, io; from campaign.cli import entry; out = io.StringIO(); sys.stdout, real = out, sys.stdout; "
        f"ok = entry._quick_show({cid!r}, {str(db)!r}, False); sys.stdout = real; "
        "print(ok, 'sqlmodel' in sys.modules, 'typer' in sys.modules)"
    )
    fast = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert fast.stdout.split() == ["True", "False", "False"]  # the console script answers from stored text
    warm = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True, env=env).stdout
    assert cold == warm
    assert all(e["hypothesis"] in warm for e in built["experiments"]) and f"{cid} status: running" in warm
