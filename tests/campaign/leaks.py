"""Where a secret value could hide after a campaign: every file under a directory, and
the database's compressed columns (a byte scan of the file cannot see into them)."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path


def files_holding(
    root: Path, values: dict[str, str], skip: Path | None = None, suffixes: tuple[str, ...] = ()
) -> list[str]:
    """`path: NAME` for every file under `root` (but `skip` and names ending in `suffixes`)
    that holds the value of NAME."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p != skip and not p.name.endswith(suffixes)):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {name}" for name, value in values.items() if value.encode() in data]
    return found


def packed_values(db: Path) -> list[bytes]:
    """The database's compressed columns (campaign.store.pack), decompressed."""
    con = sqlite3.connect(db)
    out = [
        zlib.decompress(blob)
        for table, column in (("artifacts", "content_z"), ("verdicts", "detail_z"), ("run_sides", "levels"))
        for (blob,) in con.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")
    ]
    con.close()
    return out
