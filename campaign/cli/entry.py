"""The `campaign` executable: answers `status` and `show --json` before the command-line stack loads.

Why a module of its own: importing typer and sqlmodel alone costs about a second, more
than a status line may take, so the console script lands here, answers `status` and a
fully cached `show ID --json` (campaign.store.showcache) from plain sqlite3 when it can,
and hands everything else (and every case it cannot answer) to `campaign.cli.main`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "print_status"]


def _fast_args(argv: list[str]) -> tuple[str, str | None, str | None, bool] | None:
    """`status [--db PATH] [--json]` or `show ID [--db PATH] [--json]` (options in any
    order) parsed by hand as (command, id, db, json), or None for anything else (help,
    typos, other commands): those go to the full command line."""
    if not argv or argv[0] not in ("status", "show"):
        return None
    cid: str | None = None
    db: str | None = None
    as_json = False
    rest = argv[1:]
    while rest:
        arg = rest.pop(0)
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--db" and rest and db is None:
            db = rest.pop(0)
        elif arg.startswith("--db=") and db is None:
            db = arg[len("--db=") :]
        elif argv[0] == "show" and not arg.startswith("-") and cid is None:
            cid = arg
        else:
            return None
    return argv[0], cid, db, as_json


def _quick_file(db: str | None) -> Path | None:
    """The SQLite file the quick paths read; None for a server database (or a location the
    full path refuses, naming the fix)."""
    from campaign.domain.errors import UserError
    from campaign.domain.location import is_url, resolve

    try:
        where = resolve(db)
    except UserError:
        return None
    return None if is_url(where) else Path(where)


def _quick_show(cid: str, db: str | None, as_json: bool = True) -> bool:
    """`campaign show ID [--json]` from the stored text of every piece, without sqlmodel
    (its summary too: importing typer and sqlmodel is half of its time at 1,000 experiments);
    False (nothing printed) when anything must be built (the full path then stores it)."""
    import io

    from campaign.store.quick import SCHEMA_VERSION
    from campaign.store.showcache import quick_show

    path = _quick_file(db)
    buf = io.StringIO()  # the summary is printed from the whole document
    if not (
        path is not None and path.is_file() and quick_show(path, cid, SCHEMA_VERSION, sys.stdout if as_json else buf)
    ):
        return False
    if not as_json:
        from campaign.cli.plain import console
        from campaign.cli.show import print_summary

        print_summary(console(highlight=False), json.loads(buf.getvalue()))
    return True


def _quick_status(db: str | None, as_json: bool) -> bool:
    """`campaign status` without importing typer, sqlmodel or langgraph: a status line must
    be instant at any campaign size.  False when the full path must answer (no database
    yet, an older schema to migrate, a journal to repair)."""

    from campaign.store.quick import campaign_list, stale_journals

    path = _quick_file(db)
    items = campaign_list(path) if path is not None and path.is_file() else None
    if path is None or items is None or stale_journals(path) != set():
        return False
    print_status(items, as_json)
    return True


def print_status(items: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(items, indent=2))
        return
    from rich.table import Column, Table

    from campaign.cli.plain import console, plain

    # the id is what resume, show and journal take: shown whole, whatever the width
    width = max((len(str(it["id"])) for it in items), default=2)
    t = Table(Column("id", no_wrap=True, min_width=width), "name", "status", "why")
    for it in items:
        t.add_row(*(plain(it[k] or "") for k in ("id", "name", "status", "halt_reason")))
    console(highlight=False).print(t)


def main() -> None:
    fast = _fast_args(sys.argv[1:])
    if fast is not None:
        command, cid, db, as_json = fast
        if command == "status" and _quick_status(db, as_json):
            sys.exit(0)
        if command == "show" and cid and _quick_show(cid, db, as_json):
            sys.exit(0)
    from campaign.cli.main import main as full_main

    full_main()


if __name__ == "__main__":  # `python -m campaign.cli.entry ...`: the console script's path
    main()
