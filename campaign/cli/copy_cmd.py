"""`campaign copy --from DB --to DB`: move campaigns between a SQLite file and PostgreSQL,
with their checkpoints, so a copied campaign resumes where it stood.

The records go row by row through the store (campaign.store.transfer); the checkpoints
from one LangGraph saver to the other, oldest first, each with its saved writes.  The
source is only read; a campaign already in the destination is refused before anything
is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from campaign.cli.common import fail
from campaign.domain.errors import UserError

__all__ = ["copy", "register"]


def _location(given: str, flag: str) -> str:
    """A postgresql:// URL as given; `sqlite:///path` or a plain path as the file path."""
    from campaign.domain.location import check

    path = given.removeprefix("sqlite:///") if given.startswith("sqlite:///") else given
    return check(path, flag)


@contextmanager
def _saver(db: str) -> Iterator[Any]:
    from campaign.domain.location import is_url

    if is_url(db):
        from campaign.cli.killsaver import postgres_saver

        with postgres_saver(db) as saver:
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    from campaign.cli.runner import checkpoint_path
    from campaign.domain.private import private_file

    with SqliteSaver.from_conn_string(str(private_file(checkpoint_path(Path(db))))) as saver:
        yield saver


def copy_checkpoints(src: Any, dst: Any, thread_id: str) -> int:
    """Every checkpoint of the campaign's thread, oldest first, with its pending writes."""
    found = list(src.list({"configurable": {"thread_id": thread_id}}))
    for tup in reversed(found):
        ns = tup.config["configurable"].get("checkpoint_ns", "")
        parent = tup.parent_config or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        saved = dst.put(parent, tup.checkpoint, tup.metadata, tup.checkpoint.get("channel_versions", {}))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            dst.put_writes(saved, writes, task_id)
    return len(found)


def copy(
    source: str = typer.Option(
        ..., "--from", help="the database to read: a SQLite file (PATH or sqlite:///PATH) or a postgresql:// URL"
    ),
    target: str = typer.Option(..., "--to", help="the database to write, as --from"),
    campaigns: list[str] = typer.Option(
        [], "--campaign", help="only this campaign id (repeatable); default: every campaign"
    ),
) -> None:
    """Copy campaigns with their checkpoints from one database to another (SQLite <-> PostgreSQL)."""
    from campaign.store import Store

    try:
        src_db, dst_db = _location(source, "--from"), _location(target, "--to")
        if src_db == dst_db:
            raise UserError(f"--to {target}: the same database as --from (fix: name another database)")
        if not src_db.startswith(("postgres",)) and not Path(src_db).is_file():
            raise UserError(f"--from {source}: no such file (fix: the path of a campaign database)")
        with Store(src_db) as src, Store(dst_db) as dst:
            copied = src.copy_campaigns_to(dst, campaigns or None)
        with _saver(src_db) as src_saver, _saver(dst_db) as dst_saver:
            for cid in copied:
                n = copy_checkpoints(src_saver, dst_saver, cid)
                typer.echo(f"{cid}: copied ({n} checkpoints)")
    except UserError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    app.command("copy")(copy)
