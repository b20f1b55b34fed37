"""This host's process table, read from /proc: who a pid is, and whether it is still the
process that was recorded (a recycled pid has another start time).

The core needs this for its own run lock and the adapters for the run ledger; both
read the same kernel fields, so there is one reader.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROC", "start_ticks", "stat_fields"]

PROC = Path("/proc")


def stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ..."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None
    return raw[raw.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> str:
    """The kernel's start time of `pid` in clock ticks, as text ("" where /proc is
    unavailable): tells a recycled pid from the process that recorded it."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else ""
