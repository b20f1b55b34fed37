"""`campaign schema`: the playbook's JSON Schema, for editors (yaml-language-server) and tools.

The schema is generated from the pydantic models the loader validates with, so an editor
completes and checks exactly the fields `campaign validate` accepts.  The repository ships
it as `playbooks/playbook.schema.json` (a test keeps that file current); every playbook's
first line points an editor at it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from campaign.playbook.schema import Playbook

#: the schema file shipped next to the example playbooks
SHIPPED = Path(__file__).resolve().parents[2] / "playbooks" / "playbook.schema.json"


def schema_text() -> str:
    """The playbook's JSON Schema as the text the shipped file holds."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **Playbook.model_json_schema()}
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def schema_line(playbook_path: Path) -> str:
    """The first line of a playbook written at `playbook_path`: the shipped schema by a
    path relative to the playbook when it is in this checkout (yaml-language-server resolves
    it from the file), else by its absolute path; where this installation has no shipped file,
    the name `campaign schema -o` writes."""
    if not SHIPPED.is_file():
        return "# yaml-language-server: $schema=playbook.schema.json"
    inside = playbook_path.resolve().is_relative_to(SHIPPED.parents[1])  # in this checkout: a relative path
    target = os.path.relpath(SHIPPED, playbook_path.resolve().parent) if inside else str(SHIPPED)
    return f"# yaml-language-server: $schema={target}"


def schema(
    out: Path | None = typer.Option(None, "--out", "-o", help="write it to this file instead of stdout"),
) -> None:
    """Print the playbook's JSON Schema (editor completion: see docs/cli.md)."""
    text = schema_text()
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"campaign: {out}: cannot write ({exc.strerror}) (fix: choose a writable path)", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(out))


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)
