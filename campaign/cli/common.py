"""What every command that reads a campaign database shares: its `--db` option, opening
the store, and the one-line failure (`campaign: ...`, exit status 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import typer

from campaign.domain.errors import UserError

if TYPE_CHECKING:  # sqlmodel is imported by the commands that open a store, not by `--help`
    from campaign.store import Store

__all__ = ["DB_OPT", "fail", "open_store"]

DB_OPT = typer.Option(
    None, "--db", help="campaign database (default: the playbook's `database`, else .campaign/campaign.db)"
)


def fail(exc: UserError) -> NoReturn:
    for line in exc.lines or [str(exc)]:
        typer.echo(f"campaign: {line}", err=True)
    raise typer.Exit(exc.exit_code)


def open_store(db: str | None) -> Store:
    from pathlib import Path

    from campaign.domain.location import is_url, resolve
    from campaign.store import Store

    where = resolve(db)
    if is_url(where):
        return Store(where)
    path = Path(where)
    if not path.exists():
        raise UserError(f"{path}: no campaign database (fix: run a campaign first or pass --db PATH)")
    return Store(path)
