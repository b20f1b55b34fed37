"""`campaign export ID --format csv|json [-o FILE]`: every level measurement of a campaign.

One row per (experiment, side, launch, workload, C): throughput, request rate and every
latency statistic as recorded (`campaign.store.export`).  A file is written whole or
not at all (a temp file renamed over it), so an interrupted export never leaves half a CSV.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from campaign.cli.common import DB_OPT, fail, open_store
from campaign.domain.errors import UserError

if TYPE_CHECKING:
    from campaign.store.facade import Store

__all__ = ["export", "export_text"]


class Format(str, Enum):
    csv = "csv"
    json = "json"


def export_text(store: Store, campaign_id: str, fmt: str) -> tuple[str, int]:
    """The export document of `campaign_id` and its number of measurements."""
    from campaign.store.export import columns

    rows = [m.flat() for m in store.level_measurements(campaign_id)]
    if fmt == "json":
        doc = {"campaign_id": campaign_id, "columns": columns(), "measurements": rows}
        return json.dumps(doc, indent=2) + "\n", len(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns(), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue(), len(rows)


def _write(path: Path, text: str) -> None:
    if path.is_dir():
        raise UserError(f"-o {path}: is a directory (fix: name a file, e.g. -o {path / 'levels.csv'})")
    if not path.parent.is_dir():
        raise UserError(f"-o {path}: folder {path.parent} does not exist (fix: create it or write elsewhere)")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export(
    campaign_id: str = typer.Argument(..., help="campaign id, or a prefix naming one (campaign status lists them)"),
    fmt: Format = typer.Option(Format.csv, "--format", help="csv or json"),
    out: str | None = typer.Option(None, "--output", "-o", help="write here instead of to stdout"),
    db: str | None = DB_OPT,
) -> None:
    """Every level measurement: experiment, side, launch, workload, C, tok/s, req/s, latencies."""
    from campaign.cli.ids import resolve_id

    try:
        text, count = export_text(open_store(db), resolve_id(campaign_id, db), fmt.value)
        if out is None:
            sys.stdout.write(text)
            return
        _write(Path(out), text)
    except UserError as exc:
        fail(exc)
    typer.echo(f"{out}: {count} level measurements ({fmt.value})", err=True)
