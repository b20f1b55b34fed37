"""The journal after every verdict re-renders only what changed; pages, notes and plots at any size."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from bench import scale_build
from campaign.journal import incremental, plot_worker, render
from campaign.journal.publish import publish_journal
from campaign.journal.render import render_journal
from campaign.store import Store

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, str]:
    """10 experiments, the main file showing the latest 4 in full (20 in production)."""
    monkeypatch.setattr(incremental, "RECENT", 4)
    cid = scale_build.build(tmp_path / "campaign.db", 10)
    store = Store(tmp_path / "campaign.db")
    yield store, cid
    store.close()


def add_one(store: Store, cid: str) -> str:
    n = len(store.list_experiments(cid, role="candidate")) + 1
    camp = store.get_campaign(cid)
    exp_id, _ = scale_build.add_experiment(
        store, cid, random.Random(n), n, store.snapshot(cid).latest_fingerprint_id, camp.baseline_experiment_id
    )
    return exp_id


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"bodies": 0, "plots": 0}
    real_body = render.experiment_body

    def body(*args, **kwargs):  # type: ignore[no-untyped-def]
        counts["bodies"] += 1
        return real_body(*args, **kwargs)

    def submit(kind, payload, path):  # type: ignore[no-untyped-def]
        counts["plots"] += kind == "experiment"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"")  # drawn (the drawing itself is the worker test's)

    monkeypatch.setattr(incremental, "experiment_body", body)
    monkeypatch.setattr(plot_worker, "submit", submit)
    return counts


def test_a_verdict_update_renders_only_the_new_experiment(campaign, tmp_path: Path, counted) -> None:
    store, cid = campaign
    journal = tmp_path / "j" / "scale.md"
    publish_journal(store, cid, journal)
    assert counted["bodies"] == 10
    first_plots = counted["plots"]
    assert first_plots >= 7  # every measured experiment has its plot
    pages = journal.parent / "scale.d"
    before = {p.name: p.stat().st_mtime_ns for p in pages.glob("*.md")}
    new = add_one(store, cid)
    publish_journal(store, cid, journal)
    assert counted["bodies"] == 11  # the new one, nothing else
    assert counted["plots"] == first_plots + 1
    after = {p.name: p.stat().st_mtime_ns for p in pages.glob("*.md")}
    rewritten = {name for name in after if before.get(name) != after[name]}
    # the new page, and the page of the experiment that left the main file's latest
    assert len(rewritten) == 2, rewritten
    publish_journal(store, cid, journal)  # nothing changed: nothing re-rendered
    assert counted["bodies"] == 11
    assert new.split(".")[1] in journal.read_text()


def test_main_file_holds_the_latest_and_every_experiment_has_a_page(campaign, tmp_path: Path) -> None:
    store, cid = campaign
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    text = journal.read_text()
    assert "The latest 4 of 10 experiments in full" in text
    assert text.count("\n<a id=") == 4
    pages = sorted(p.name for p in (tmp_path / "scale.d").glob("*.md"))
    assert len(pages) == 10
    old = store.list_experiments(cid, role="candidate")[0]
    key = render.experiment_key(store.view(cid), old.id)
    assert f"[details](scale.d/{key}.md)" in text  # scoreboard and dead ends link the page
    page = (tmp_path / "scale.d" / f"{key}.md").read_text()
    assert f"### 1. {old.hypothesis}" in page and f"<!-- notes:{key} campaign:{cid} -->" in page
    assert "](../scale.md)" in page


def test_small_campaign_main_file_reads_as_the_single_file_journal(tmp_path: Path) -> None:
    """At the demo's size the main file is exactly today's journal."""
    cid = scale_build.build(tmp_path / "small.db", 5)
    small = Store(tmp_path / "small.db")
    journal = tmp_path / "small.md"
    publish_journal(small, cid, journal, plots=False, db_label="small.db")
    view = small.view(cid)
    assert journal.read_text() == render_journal(view, db_label="small.db", generated_at=view.updated_at)
    small.close()


def test_notes_survive_wherever_they_are_written(campaign, tmp_path: Path) -> None:
    store, cid = campaign
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    view = store.view(cid)
    ids = [e.id for e in view.experiments]
    old_key = render.experiment_key(view, ids[0])
    edge_key = render.experiment_key(view, ids[-4])  # leaves the main file with the next experiment
    text = journal.read_text()
    text = text.replace(
        f"<!-- notes:{edge_key} campaign:{cid} -->\n", f"<!-- notes:{edge_key} campaign:{cid} -->\nmain-file note\n"
    )
    journal.write_text(text)
    page = tmp_path / "scale.d" / f"{old_key}.md"
    page.write_text(
        page.read_text().replace(
            f"<!-- notes:{old_key} campaign:{cid} -->\n", f"<!-- notes:{old_key} campaign:{cid} -->\npage note\n"
        )
    )
    publish_journal(store, cid, journal, plots=False)
    assert "main-file note" in journal.read_text() and "page note" in page.read_text()
    add_one(store, cid)
    publish_journal(store, cid, journal, plots=False)
    moved = (tmp_path / "scale.d" / f"{edge_key}.md").read_text()
    assert "main-file note" in moved and "main-file note" not in journal.read_text()  # it moved home, once
    assert "Orphaned notes" not in journal.read_text()
    (tmp_path / "scale.d" / "index.sqlite").unlink()  # cache lost: notes are read back from the files
    publish_journal(store, cid, journal, plots=False)
    assert "page note" in page.read_text()
    assert "main-file note" in (tmp_path / "scale.d" / f"{edge_key}.md").read_text()


def test_plots_are_drawn_by_a_worker_process_and_redrawn_when_lost(tmp_path: Path) -> None:
    cid = scale_build.build(tmp_path / "campaign.db", 2)
    store = Store(tmp_path / "campaign.db")
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal)
    assert plot_worker.is_pending(tmp_path / "scale.plots" / "campaign-overview.png")  # not waited for
    plot_worker.wait_idle(timeout=300)
    plots = sorted((tmp_path / "scale.plots").glob("exp-*.png"))
    assert len(plots) == 2 and (tmp_path / "scale.plots" / "campaign-overview.png").exists()
    plots[0].unlink()
    publish_journal(store, cid, journal)
    plot_worker.wait_idle(timeout=300)
    assert plots[0].exists()


def test_temp_files_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    import os
    import subprocess

    cid = scale_build.build(tmp_path / "campaign.db", 1)
    store = Store(tmp_path / "campaign.db")
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    plots = tmp_path / "scale.plots"
    plots.mkdir(exist_ok=True)
    (plots / f".exp-x.png.{dead.pid}.tmp").write_bytes(b"half")
    (plots / f".exp-y.png.{os.getpid()}.tmp").write_bytes(b"being written")  # a live writer's
    old_page = tmp_path / "scale.d" / ".x.md.tmp"
    old_page.write_text("half")
    os.utime(old_page, (0, 0))
    publish_journal(store, cid, journal, plots=False)
    left = sorted(p.name for p in [*plots.iterdir(), *(tmp_path / "scale.d").iterdir()] if p.name.endswith(".tmp"))
    assert left == [f".exp-y.png.{os.getpid()}.tmp"]
    store.close()


def test_the_index_keeps_only_the_latest_bodies_and_an_edited_old_page_is_rendered_again(
    campaign, tmp_path: Path, counted
) -> None:
    """Older sections live on their pages only (at 1,000 experiments every section's text
    was most of the index); a page a person edited (or removed) is rendered again from
    the database, keeping their notes."""
    import sqlite3

    store, cid = campaign
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal)
    with sqlite3.connect(tmp_path / "scale.d" / "index.sqlite") as con:
        with_body = {r[0] for r in con.execute("SELECT id FROM entries WHERE body IS NOT NULL")}
    ids = [e.id for e in store.view(cid).experiments]
    assert [i for i in ids if i in with_body] == ids[-4:]

    view = store.view(cid)
    key = render.experiment_key(view, ids[0])
    page = tmp_path / "scale.d" / f"{key}.md"
    original = page.read_text()
    edited = original.replace(
        f"<!-- notes:{key} campaign:{cid} -->\n", f"<!-- notes:{key} campaign:{cid} -->\nkept note\n"
    )
    edited = edited.replace(f"### 1. {view.experiments[0].hypothesis}", "### 1. scribbled over")
    page.write_text(edited)
    bodies = counted["bodies"]
    publish_journal(store, cid, journal)
    assert counted["bodies"] == bodies + 1  # that page only
    text = page.read_text()
    assert "kept note" in text and "scribbled over" not in text
    assert text.startswith(
        original.split(f"<!-- notes:{key} campaign:{cid} -->")[0].rstrip("\n")
    )  # generated part restored
    page.unlink()
    publish_journal(store, cid, journal)
    assert "kept note" in page.read_text()  # a lost page comes back with the notes the index holds
    assert counted["bodies"] == bodies + 2


def test_keys_handed_out_before_are_kept_and_only_new_experiments_are_slugged(campaign) -> None:
    store, cid = campaign
    view = store.view(cid)
    every = render.experiment_keys(view)
    ids = list(every)
    assert render.experiment_keys(view, {i: every[i] for i in ids[:-2]}) == every
    assert render.experiment_keys(view, {ids[0]: "custom-key"}) == {**every, ids[0]: "custom-key"}
    assert render.experiment_keys(view, {"vanished": every[ids[0]]}) == every  # not the first ones: derived again
    twin = view.model_copy(update={"experiments": [*view.experiments, view.experiments[0].model_copy()]})
    keys = render.experiment_keys(twin, every)  # a repeated id slugs to a taken key: the next free suffix
    assert len(set(keys.values())) == len(keys)


def test_a_loop_update_reads_a_window_and_writes_what_a_full_render_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The update after a verdict reads the same number of experiments at 10 as at 25
    (what changed and the latest), and its journal is byte for byte what a render from
    scratch writes: numbers, node time, "same as experiment N", links, dead ends."""
    monkeypatch.setattr(incremental, "RECENT", 4)
    monkeypatch.setattr(incremental, "SCOREBOARD_MAIN", 6)  # the main file's latest rows, then pages
    monkeypatch.setattr(incremental, "SCOREBOARD_PAGE", 4)
    windows: list[int] = []
    for n in (10, 25):
        cid = scale_build.build(tmp_path / f"c{n}.db", n)
        store = Store(tmp_path / f"c{n}.db")
        journal = tmp_path / f"loop{n}" / "scale.md"
        publish_journal(store, cid, journal, plots=False)
        real_view = store.view
        seen: list[int] = []

        def view(*args, **kwargs):  # type: ignore[no-untyped-def]
            got = real_view(*args, **kwargs)
            seen.append(len(got.experiments))
            return got

        monkeypatch.setattr(store, "view", view)
        add_one(store, cid)
        old = store.list_experiments(cid, role="candidate")[1]
        store.set_adopted(old.id, not old.adopted)  # an old experiment changes too: its page and scoreboard page
        board = {p.name: p.stat().st_mtime_ns for p in (journal.parent / "scale.d").glob("scoreboard-*.md")}
        publish_journal(store, cid, journal, plots=False, verify=False)
        monkeypatch.setattr(store, "view", real_view)
        windows.append(seen[0])
        assert len(seen) == 1
        rewritten = {
            p.name
            for p in (journal.parent / "scale.d").glob("scoreboard-*.md")
            if board.get(p.name) != p.stat().st_mtime_ns
        }
        last = f"scoreboard-{-(-(n + 1) // 4)}.md"
        assert rewritten == {"scoreboard-1.md", last}  # the old experiment's page and the last
        fresh = tmp_path / f"fresh{n}" / "scale.md"
        publish_journal(store, cid, fresh, plots=False)
        assert journal.read_text() == fresh.read_text()
        pages = sorted(p.name for p in (journal.parent / "scale.d").glob("*.md"))
        assert pages == sorted(p.name for p in (fresh.parent / "scale.d").glob("*.md")) and len(pages) == n + 1 + 1 + -(
            -(n + 1) // 4
        )
        for name in pages:
            assert (journal.parent / "scale.d" / name).read_text() == (fresh.parent / "scale.d" / name).read_text(), (
                name
            )
        store.close()
    assert windows == [5, 5]  # the latest 4 and the old one that changed


def test_a_database_restored_from_an_older_copy_redraws_the_journal(campaign, tmp_path: Path) -> None:
    """The index's change number is ahead of the database: nothing it holds can be trusted."""
    import shutil

    store, cid = campaign
    store.close()
    shutil.copy(tmp_path / "campaign.db", tmp_path / "older.db")
    import sqlite3

    journal = tmp_path / "scale.md"
    store = Store(tmp_path / "campaign.db")
    publish_journal(store, cid, journal, plots=False)
    add_one(store, cid)
    first = store.list_experiments(cid, role="candidate")[0].id
    store.close()
    with sqlite3.connect(tmp_path / "campaign.db") as con:  # a change the older copy does not have
        con.execute("UPDATE experiments SET node = 'moved-node' WHERE id = ?", (first,))
    store = Store(tmp_path / "campaign.db")
    publish_journal(store, cid, journal, plots=False, verify=False)
    key = render.experiment_key(store.view(cid), first)
    assert "moved-node" in (tmp_path / "scale.d" / f"{key}.md").read_text()
    store.close()
    older = Store(tmp_path / "older.db")
    publish_journal(older, cid, journal, plots=False, verify=False)
    fresh = tmp_path / "fresh" / "scale.md"
    publish_journal(older, cid, fresh, plots=False)
    assert journal.read_text() == fresh.read_text()
    for page in (fresh.parent / "scale.d").glob("*.md"):
        assert (tmp_path / "scale.d" / page.name).read_text() == page.read_text(), page.name
    older.close()


def _first_page(store: Store, cid: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The journal published, and the first candidate with its key and its page."""
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    first = store.list_experiments(cid, role="candidate")[0]
    key = render.experiment_key(store.view(cid), first.id)
    return journal, first, key, tmp_path / "scale.d" / f"{key}.md"


def test_the_loop_update_keeps_a_note_on_an_old_page_it_rewrites(campaign, tmp_path: Path) -> None:
    """The loop's update does not look at every page, but one it is about to rewrite (its
    experiment changed) is read first: the person's note survives."""
    store, cid = campaign
    journal, first, key, page = _first_page(store, cid, tmp_path)
    page.write_text(
        page.read_text().replace(
            f"<!-- notes:{key} campaign:{cid} -->\n", f"<!-- notes:{key} campaign:{cid} -->\nwritten on the page\n"
        )
    )
    store.set_adopted(first.id, not first.adopted)
    publish_journal(store, cid, journal, plots=False, verify=False)
    text = page.read_text()
    assert "written on the page" in text
    assert ("WIN (adopted)" in text) == (not first.adopted) or "WIN" not in text


def test_another_campaigns_notes_on_a_page_stay_under_its_id(campaign, tmp_path: Path) -> None:
    """A page holding a notes block marked with another campaign's id (a journal directory
    two campaigns wrote): rewritten, the page keeps that block under that id, and it never
    becomes this campaign's note."""
    store, cid = campaign
    journal, first, key, page = _first_page(store, cid, tmp_path)
    theirs = f"<!-- notes:{key} campaign:other-1a2b3c -->\nTHEIR NOTE\n<!-- /notes:{key} -->\n"
    page.write_text(page.read_text() + "\n" + theirs)
    for verify in (False, True):
        store.set_adopted(first.id, not store.list_experiments(cid, role="candidate")[0].adopted)
        publish_journal(store, cid, journal, plots=False, verify=verify)
        text = page.read_text()
        assert text.count("THEIR NOTE") == 1 and theirs in text, text[-400:]
        assert render.parse_notes(text, cid).get(key, "") == ""
        assert "THEIR NOTE" not in journal.read_text()


def test_a_journal_without_plots_never_imports_matplotlib(tmp_path: Path) -> None:
    """`--no-plots` renders and the controller's updates stay free of matplotlib (1 s of
    imports and ~30 MB: the plots are drawn by worker processes)."""
    import subprocess

    cid = scale_build.build(tmp_path / "campaign.db", 3)
    code = (
        "import sys; from pathlib import Path; from campaign.store import Store; "
        "from campaign.journal.publish import publish_journal; "
        f"s = Store({str(tmp_path / 'campaign.db')!r}); "
        f"publish_journal(s, {cid!r}, Path({str(tmp_path / 'j.md')!r}), plots=False); "
        f"publish_journal(s, {cid!r}, Path({str(tmp_path / 'j.md')!r}), plots=False, verify=False); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("damage", ["garbage", "foreign_table", "bad_meta", "bad_row"])
def test_a_damaged_index_is_started_over(campaign, tmp_path: Path, damage: str) -> None:
    """The index is a cache: whatever is in its place, the journal comes out as from scratch."""
    import sqlite3

    store, cid = campaign
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    index = tmp_path / "scale.d" / "index.sqlite"
    if damage == "garbage":
        index.write_bytes(b"not a database " * 100)
    elif damage in ("bad_meta", "bad_row"):
        with sqlite3.connect(index) as con:
            if damage == "bad_meta":
                con.execute("UPDATE meta SET v = 'not json' WHERE k = 'seq'")
            else:
                con.execute("UPDATE entries SET page_stat = 'not json'")
    else:
        index.unlink()
        with sqlite3.connect(index) as con:
            con.execute("CREATE TABLE entries (id TEXT PRIMARY KEY, other TEXT)")
            con.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            con.execute("INSERT INTO meta VALUES ('version', '\"6\"')")
    add_one(store, cid)
    publish_journal(store, cid, journal, plots=False, verify=False)
    fresh = tmp_path / "fresh" / "scale.md"
    publish_journal(store, cid, fresh, plots=False)
    assert journal.read_text() == fresh.read_text()


def test_an_index_that_cannot_be_opened_is_named_in_one_line(tmp_path: Path) -> None:
    """`campaign journal` where `<journal>.d/index.sqlite` is a directory: one line naming
    that file (not the page directory, which is fine), exit 2, nothing else written."""
    import subprocess

    cid = scale_build.build(tmp_path / "campaign.db", 2)
    (tmp_path / "j.d" / "index.sqlite").mkdir(parents=True)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "campaign.cli.entry",
            "journal",
            cid,
            "--db",
            str(tmp_path / "campaign.db"),
            "--out",
            str(tmp_path / "j.md"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert f"{tmp_path / 'j.d' / 'index.sqlite'}: cannot open the journal's index" in lines[0]
    assert "fix:" in lines[0] and not (tmp_path / "j.md").exists()


def test_a_note_saved_while_the_journal_is_rendered_is_kept(
    campaign, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The render reads the file, renders for a while, then replaces it: a note a person
    saved in between is read again and kept, not overwritten with the older text."""
    store, cid = campaign
    journal = tmp_path / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    real = incremental.render_main
    saved: list[bool] = []

    def slow_render(*args, **kwargs):  # type: ignore[no-untyped-def]
        text = real(*args, **kwargs)
        if not saved:  # the person's editor saves while the first render runs
            current = journal.read_text()
            journal.write_text(
                current.replace(
                    f"<!-- notes:campaign campaign:{cid} -->\n",
                    f"<!-- notes:campaign campaign:{cid} -->\nsaved mid-render\n",
                    1,
                )
            )
            saved.append(True)
        return text

    monkeypatch.setattr(incremental, "render_main", slow_render)
    add_one(store, cid)
    publish_journal(store, cid, journal, plots=False)
    assert saved and "saved mid-render" in journal.read_text()


def test_the_main_file_lists_the_latest_dead_ends_and_a_page_lists_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main file's dead-end table is bounded like its scoreboard: the latest
    DEAD_ENDS_MAIN rows and a link to `dead-ends.md`, which lists every dead end; the
    loop's update writes what a render from scratch writes."""
    monkeypatch.setattr(incremental, "RECENT", 4)
    monkeypatch.setattr(incremental, "DEAD_ENDS_MAIN", 3)
    cid = scale_build.build(tmp_path / "c.db", 20)
    store = Store(tmp_path / "c.db")
    journal = tmp_path / "loop" / "scale.md"
    publish_journal(store, cid, journal, plots=False)
    dead = [d for d in store.dead_ends(cid)]
    assert len(dead) > 3
    while store.get_verdict(add_one(store, cid)).kind != "dead_end":  # the loop's update adds a dead end
        pass
    publish_journal(store, cid, journal, plots=False, verify=False)
    dead = store.dead_ends(cid)
    keys = render.experiment_keys(store.view(cid))
    main = journal.read_text()
    section = main.split("## Dead ends", 1)[1].split("\n## ", 1)[0]
    table_rows = [line for line in section.splitlines() if line.startswith("| ") and "hypothesis" not in line]
    assert len(table_rows) == 3
    assert [keys[d.experiment_id] in row for d, row in zip(dead[-3:], table_rows)] == [True] * 3
    assert f"The latest 3 of {len(dead)} dead ends" in section and "(scale.d/dead-ends.md)" in section
    page = (journal.parent / "scale.d" / "dead-ends.md").read_text()
    assert all(f"]({keys[d.experiment_id]}.md)" in page for d in dead)
    fresh = tmp_path / "fresh" / "scale.md"
    publish_journal(store, cid, fresh, plots=False)
    assert journal.read_text() == fresh.read_text()
    assert page == (fresh.parent / "scale.d" / "dead-ends.md").read_text()
    store.close()
