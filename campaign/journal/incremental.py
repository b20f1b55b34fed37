"""The journal after every verdict, at the cost of what changed (not of the whole campaign).

Why: a week-long campaign reaches 1,000+ experiments and the journal is regenerated
after each verdict; redrawing every section and plot each time is quadratic.  Each
experiment's section, scoreboard cells and plot are cached in `<journal>.d/index.sqlite`
(`campaign.journal.index`) and re-rendered only when a record they show was written:
the database stamps every such write with a change number (`campaign.store.changes`,
SQLite triggers), and the index keeps the last number it has seen.  An update reads
from the Store only a window of the campaign (what changed, the latest experiments,
the campaign-wide parts) and from the index only the rows it shows, so what it decodes
and renders does not grow with the campaign.  The index keeps every experiment's
scoreboard and dead-end cells but the section text only of the latest (older ones
live on their pages; a page a person edited or removed is rendered again).

Layout: the main file holds the header, notes, baseline and its history, the
scoreboard (the latest `SCOREBOARD_MAIN` rows when longer; the full one in pages of
`SCOREBOARD_PAGE` rows listed by `<journal>.d/scoreboard.md`), the dead ends and the
latest `RECENT` experiments in full.  Every experiment has its own page
`<journal>.d/<key>.md`.  An experiment's notes block lives in the main file while it
is among the latest, then moves to its page; edits in either place are kept (a page's
notes are re-read when the file changed: by every `verify` render, and by the loop's
update before it rewrites that page).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from campaign.domain.errors import UserError
from campaign.domain.records import CampaignView
from campaign.journal import mdsafe
from campaign.journal.format import (
    DEAD_END_HEADER,
    OVERVIEW_LAST,
    dead_end_cells,
    linked_table,
    plot_file_name,
    plot_workloads,
    row_prefix,
    scoreboard_cells,
    scoreboard_table,
)
from campaign.journal.index import JournalIndex
from campaign.journal.owner import check_owner
from campaign.journal.render import (
    MainParts,
    experiment_body,
    experiment_key,
    experiment_keys,
    foreign_part,
    notes_part,
    parse_notes,
    render_main,
    write_journal,
)
from campaign.ports.store import JournalReader

__all__ = ["DEAD_ENDS_MAIN", "RECENT", "SCOREBOARD_MAIN", "SCOREBOARD_PAGE", "publish"]

RECENT = 20  # experiments shown in full in the main file
SCOREBOARD_MAIN = 100  # scoreboard rows in the main file
SCOREBOARD_PAGE = 500  # rows per page of the full scoreboard
DEAD_ENDS_MAIN = 50  # dead ends in the main file; every one on `<journal>.d/dead-ends.md`
_PLOTDIR = "PLOTDIR-5e1f"  # placeholder for the plot directory, resolved per file


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: cannot read the existing journal ({exc}) "
            "(fix: restore the file or move it away; its notes blocks are kept only if readable)"
        ) from None


def _stat(path: Path | str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _page(
    view: CampaignView, number: int, body: str, notes: str | None, key: str, main_name: str, plot_rel: str
) -> str:
    back = f"[{mdsafe.text(view.name)}](../{quote(main_name)})"
    where = (
        notes_part(key, notes or "", view.id)
        if notes is not None
        else f"_Notes on this experiment are in the main journal ({back}) while it is among the latest._\n"
    )
    return (
        f"# {mdsafe.text(view.name)}: experiment {number}\n\nPart of the journal {back}; "
        f"edit only inside notes blocks, everything else is regenerated.\n\n"
        f"{body.replace(f']({_PLOTDIR}/', f'](../{plot_rel}/')}{where}\n"
    )


def _stamp(base: str, view: CampaignView) -> str:
    """What every section depends on: when it changes, everything is rendered again.  The
    latest environment decides which dead ends are re-opened (the others' revisit lists
    and environments are final, or stamped as changed)."""
    return hashlib.sha1(
        repr((base, view.node, view.environment and view.environment.model_dump())).encode()
    ).hexdigest()


def publish(
    store: JournalReader, campaign_id: str, path: Path, *, db_label: str = "", plots: bool = True, verify: bool = True
) -> Path:
    """Bring the journal at `path` up to date with the store, re-rendering only what changed.

    `verify`: also look at every page and plot on disk (a page a person edited or removed,
    a plot lost with a killed worker): what `campaign journal` does.  The loop's update
    after a verdict does not (its cost must not grow with the campaign); it checks the
    pages it rewrites and the plots it submitted."""
    target = Path(path)
    pages = target.parent / f"{target.stem}.d"
    for attempt in (1, 2):
        try:
            pages.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"{pages}: cannot write the journal's page directory ({exc.strerror or exc}) "
                "(fix: make it writable, or set `journal:` in the playbook to a writable path)"
            ) from None
        try:
            idx = JournalIndex(pages / "index.sqlite")
        except (OSError, sqlite3.Error) as exc:
            raise UserError(
                f"{pages / 'index.sqlite'}: cannot open the journal's index ({exc}) (fix: remove "
                f"whatever is at that path and make {pages} writable; the index is a cache, the "
                "journal is then rendered again in full)"
            ) from None
        done = False
        try:
            _publish(store, campaign_id, target, idx, db_label=db_label, plots=plots, verify=verify)
            done = True
        except sqlite3.DatabaseError as exc:  # the index is damaged: it is a cache, start it over
            if attempt == 2:
                raise UserError(
                    f"{pages / 'index.sqlite'}: the journal's index is unreadable ({exc}) "
                    "(fix: delete it; the journal is then rendered again in full)"
                ) from None
        finally:
            idx.close(commit=done)
        if done:
            break
        with contextlib.suppress(OSError):
            (pages / "index.sqlite").unlink()
    with contextlib.suppress(OSError):
        (pages / "index.json").unlink()  # an older checkout's index
    return target


def _publish(
    store: JournalReader, campaign_id: str, target: Path, idx: JournalIndex, *, db_label: str, plots: bool, verify: bool
) -> None:
    from campaign.journal import plot_worker

    pages = target.parent / f"{target.stem}.d"
    plot_dir = target.parent / f"{target.stem}.plots"
    plot_rel = plot_dir.name
    stamp_base = f"{campaign_id}|{int(plots)}|{RECENT}"
    meta = idx.meta
    known = idx.count()
    ids, fed, seq = store.journal_changes(campaign_id, meta.get("seq") if known else None)
    if fed is not None and (known > len(ids) or idx.id_at(known) != ids[known - 1]):
        fed = None  # the record's order is not the one the index holds: start over
    numbers = {i: n for n, i in enumerate(ids, 1)}
    changed = set(ids) if fed is None else {i for i in fed if numbers.get(i, known + 1) <= known} | set(ids[known:])
    prev_recent: list[str] = meta.get("recent", [])
    unconfirmed: list[str] = meta.get("unconfirmed", [])  # plots submitted, not yet seen on disk
    entries: dict[str, Any] = {}
    if fed is not None:
        entries = idx.all() if verify else idx.get(changed | set(ids[-RECENT:]) | set(prev_recent) | set(unconfirmed))
        unconfirmed = [i for i in unconfirmed if i in entries and entries[i].get("plot")]
        if plots:  # a plot lost with a killed worker is drawn again
            lost = {
                i
                for i in (entries if verify else unconfirmed)
                if entries[i].get("plot")
                and not (plot_dir / entries[i]["plot"]).exists()
                and not plot_worker.is_pending(plot_dir / entries[i]["plot"])
            }
            changed |= lost
            unconfirmed = [i for i in unconfirmed if i not in lost and not (plot_dir / entries[i]["plot"]).exists()]
    edited = (
        {
            i
            for i, e in entries.items()
            if e.get("page_stat") is not None and _stat(os.path.join(pages, f"{e['key']}.md")) != e["page_stat"]
        }
        if verify
        else set()
    )
    changed |= {i for i in edited if "body" not in entries[i]}  # the index keeps only recent bodies: render again
    changed |= {i for i in ids[-RECENT:] if i in entries and "body" not in entries[i]}  # back among the latest
    view: CampaignView | None = None
    whole = False  # the view holds every experiment (a full render)
    if fed is not None:  # a window: what changed and what the main file and overview show
        tail = ids[-max(RECENT, 2 * OVERVIEW_LAST if plots else 0) :]
        view = store.view(campaign_id, detail=changed, window=changed | set(tail))
        if meta.get("stamp") != _stamp(stamp_base, view):
            view = None
    if view is None:  # first render, renderer or environment changed, or an older database: everything
        view, whole = store.view(campaign_id), True
        ids = [e.id for e in view.experiments]
        numbers = {i: n for n, i in enumerate(ids, 1)}
        idx.clear()
        entries, changed, unconfirmed, prev_recent = {}, set(ids), [], []
    keys = {i: e["key"] for i, e in entries.items()}
    if whole:
        keys = experiment_keys(view)
    else:
        for exp_id in ids[known:]:  # new experiments, in order: the next free slug
            base = key = experiment_key(view, exp_id)
            n = 2
            while key in keys.values() or idx.key_taken(key):
                key, n = f"{base}-{n}", n + 1
            keys[exp_id] = key
    view.numbers = numbers
    recent = ids[-RECENT:]
    existing = _read(target)
    check_owner(target, existing, campaign_id)
    main_notes = parse_notes(existing, campaign_id) if existing else {}
    if verify or whole:  # a killed writer's temp files: listing thousands of pages is not the loop's job
        _remove_stale_temp_files(pages, plot_dir)

    dead = {d.experiment_id: d for d in view.dead_ends if d.experiment_id in changed}
    for exp in view.experiments:
        if exp.id not in changed:
            continue
        key, number = keys[exp.id], numbers[exp.id]
        plot = name = None
        workloads = plot_workloads(exp) if plots else []
        if workloads:
            name = plot_file_name(view, exp.id)
            plot = f"{_PLOTDIR}/{name}"
            plot_worker.submit("experiment", (exp, workloads), plot_dir / name)
            unconfirmed.append(exp.id)
        old = entries.get(exp.id, {})
        if (
            old.get("page_stat") is not None
            and not verify
            and _stat(os.path.join(pages, f"{old['key']}.md")) != old["page_stat"]
        ):
            edited.add(exp.id)  # about to be rewritten: a person's notes on it are read first
        entries[exp.id] = {
            "key": key,
            "number": number,
            "body": experiment_body(view, exp, number, key, plot),
            "row": row_prefix(scoreboard_cells(view, exp, number)),
            "plot": name,
            "dead": row_prefix(dead_end_cells(dead[exp.id])) if exp.id in dead else None,
            "in_main": old.get("in_main"),
            "notes": old.get("notes"),
            "page_stat": old.get("page_stat"),
            "dirty": True,
        }
    scored = (bool(meta.get("scored")) and not whole) or any(e.verdict is not None for e in view.experiments)
    has_overview = scored or len(view.baseline_history) >= 2
    overview_path = plot_dir / "campaign-overview.png"
    if plots and changed and not plot_worker.is_pending(overview_path) and has_overview:
        plot_worker.submit("overview", view, overview_path)

    in_recent = set(recent)
    touched = set(ids) if verify or whole else changed | edited | in_recent | set(prev_recent)
    for exp_id in (i for i in ids if i in touched):
        entry, key = entries[exp_id], keys[exp_id]
        page = pages / f"{key}.md"
        if exp_id in edited:
            text = _read(page)  # a human edited the page: its notes block is theirs
            entry["notes"] = parse_notes(text, campaign_id).get(key, "") if text else entry.get("notes")
            entry["page_stat"] = None
        if entry.get("in_main") is None and entry.get("notes") is None:  # first render: notes from anywhere
            text = _read(page)
            entry["notes"] = (parse_notes(text, campaign_id).get(key, "") if text else "") or main_notes.get(key, "")
        elif entry.get("in_main"):
            entry["notes"] = main_notes.get(key, "")
        in_main = exp_id in in_recent
        if in_main:
            main_notes[key] = entry["notes"] or ""
        if entry.pop("dirty", False) or entry.get("page_stat") is None or entry.get("in_main") != in_main:
            kept = foreign_part(_read(page), campaign_id)  # another campaign's notes there are not ours to drop
            _write_page(
                page,
                _page(
                    view,
                    entry["number"],
                    entry["body"],
                    None if in_main else entry["notes"],
                    key,
                    target.name,
                    plot_rel,
                )
                + kept,
            )
            entry["page_stat"] = _stat(page)
        entry["in_main"] = in_main
        if not in_main:
            entry.pop("body", None)  # on its page now; a new render brings it back when needed
    idx.put({i: entries[i] for i in touched})

    def link(exp_id: str, key: str) -> str:
        return f"#{key}" if exp_id in in_recent else f"{pages.name}/{key}.md"

    shown = ids[-SCOREBOARD_MAIN:] if len(ids) > SCOREBOARD_MAIN else None
    board = idx.rows(len(ids) - len(shown) + 1 if shown else 1, len(ids))
    dead_rows, dead_total = idx.dead_rows(DEAD_ENDS_MAIN), idx.dead_count()
    links = {i: link(i, k) for i, k, _ in board} | {i: link(i, k) for i, k, _ in dead_rows}
    full = f"{pages.name}/scoreboard.md"
    if shown is not None or pages.joinpath("scoreboard.md").exists():
        _scoreboard_pages(
            idx, view.name, target.name, pages, len(ids), None if verify or whole else {numbers[i] for i in changed}
        )
    dead_page = pages / "dead-ends.md"
    if (dead_total > DEAD_ENDS_MAIN or dead_page.exists()) and (verify or whole or dead or not dead_page.exists()):
        _dead_end_page(idx, view.name, target.name, dead_page)
    parts = MainParts(
        ids=ids,
        rows={i: row for i, _, row in board},
        links=links,
        dead_rows=[(i, row) for i, _, row in dead_rows],
        bodies={i: entries[i]["body"].replace(f"]({_PLOTDIR}/", f"]({plot_rel}/") for i in recent},
        scoreboard_ids=shown,
        scoreboard_note=f"The latest {len(shown)} of {len(ids)} experiments; every one is in "
        f"[the full scoreboard]({full})."
        if shown is not None
        else None,
        dead_ends_note=f"The latest {len(dead_rows)} of {dead_total} dead ends; every one is in "
        f"[the list of dead ends]({pages.name}/dead-ends.md)."
        if dead_total > len(dead_rows)
        else None,
        experiments_note=f"The latest {len(recent)} of {len(ids)} experiments in full; every experiment "
        "has its own page, linked from the scoreboard."
        if len(ids) > RECENT
        else None,
        notes_elsewhere=[k for k in main_notes if k not in {keys[i] for i in recent} and idx.key_taken(k)],
        keys=keys,
    )
    overview = f"{plot_rel}/campaign-overview.png" if plots and has_overview else None
    if overview and not overview_path.exists() and not changed:
        plot_worker.submit("overview", view, overview_path)
    text = render_main(view, existing, parts, overview_plot=overview, db_label=db_label, notes=main_notes)
    for _ in range(3):  # a person saved the file while it was rendered: their notes win, render again
        latest = _read(target)
        if latest == existing:
            break
        before = parse_notes(existing, campaign_id) if existing else {}
        after = parse_notes(latest, campaign_id) if latest else {}
        main_notes.update({k: v for k, v in after.items() if before.get(k) != v})
        existing = latest
        text = render_main(view, existing, parts, overview_plot=overview, db_label=db_label, notes=main_notes)
    write_journal(target, text)
    idx.meta.update(stamp=_stamp(stamp_base, view), seq=seq, scored=scored, recent=recent, unconfirmed=unconfirmed)


def _scoreboard_pages(
    idx: JournalIndex, name: str, main_name: str, pages: Path, total: int, changed: set[int] | None
) -> None:
    """The full scoreboard in pages of SCOREBOARD_PAGE rows (`scoreboard-<k>.md`), listed by
    `scoreboard.md`: an update rewrites the last page and those holding a changed row
    (`changed`: their numbers; None: every page), not a table of the whole campaign."""
    count = max(1, -(-total // SCOREBOARD_PAGE))
    todo = set(range(1, count + 1)) if changed is None else {(n - 1) // SCOREBOARD_PAGE + 1 for n in changed} | {count}
    title = mdsafe.text(name)
    for k in sorted(todo):
        first, last = (k - 1) * SCOREBOARD_PAGE + 1, min(total, k * SCOREBOARD_PAGE)
        rows = idx.rows(first, last)
        nav = " · ".join(
            x
            for x in (
                f"[previous](scoreboard-{k - 1}.md)" if k > 1 else "",
                f"[next](scoreboard-{k + 1}.md)" if k < count else "",
            )
            if x
        )
        _write_page(
            pages / f"scoreboard-{k}.md",
            f"# {title}: scoreboard, experiments {first}-{last}\n\n"
            f"Back to [the journal](../{main_name}) and [every page](scoreboard.md). {nav}\n\n"
            f"{scoreboard_table([r for _, _, r in rows], {i: f'{key}.md' for i, key, _ in rows}, [i for i, _, _ in rows])}\n",
        )
    listing = "\n".join(
        f"- [experiments {(k - 1) * SCOREBOARD_PAGE + 1}-{min(total, k * SCOREBOARD_PAGE)}](scoreboard-{k}.md)"
        for k in range(1, count + 1)
    )
    _write_page(
        pages / "scoreboard.md",
        f"# {title}: scoreboard\n\nEvery experiment, in order, "
        f"{SCOREBOARD_PAGE} to a page; back to [the journal](../{main_name}).\n\n{listing}\n",
    )


def _dead_end_page(idx: JournalIndex, name: str, main_name: str, page: Path) -> None:
    """Every dead end, in order, each linked to its experiment's page: rewritten only when
    a dead end is added or changed (the main file keeps the latest DEAD_ENDS_MAIN)."""
    rows = idx.dead_rows()
    _write_page(
        page,
        f"# {mdsafe.text(name)}: dead ends\n\nEvery dead end, in order; back to "
        f"[the journal](../{main_name}). Do not retry these unless their revisit condition holds.\n\n"
        f"{linked_table(DEAD_END_HEADER, [r for _, _, r in rows], [f'{k}.md' for _, k, _ in rows])}\n",
    )


def _remove_stale_temp_files(*dirs: Path) -> None:
    """Temp files a killed writer left: a page's (older than a minute), a plot worker's (its
    pid, in the name, is gone).  Live writers' files are left alone."""
    import time

    for d in dirs:
        try:  # names, not Path objects: a campaign's page directory holds thousands
            temps = [d / n for n in os.listdir(d) if n.startswith(".") and n.endswith(".tmp")]
        except OSError:
            continue
        for tmp in temps:
            pid = tmp.name[:-4].rsplit(".", 1)[-1]
            try:
                if pid.isdigit():
                    try:
                        os.kill(int(pid), 0)
                        continue  # the worker is alive
                    except ProcessLookupError:
                        pass
                    except PermissionError:
                        continue
                elif time.time() - tmp.stat().st_mtime < 60:
                    continue
                tmp.unlink()
            except OSError:
                pass


def _write_page(path: Path, text: str) -> None:
    """Atomic but not fsynced: a page is regenerated from the database whenever it is lost,
    and 1,000 fsyncs would make a full render wait on the disk."""
    tmp = path.parent / f".{path.name}.tmp"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(
            f"{path}: cannot write the journal page ({exc.strerror or exc}) (fix: make {path.parent} writable)"
        ) from None
