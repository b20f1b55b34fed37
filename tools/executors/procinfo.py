"""What the local node knows about its processes: group members, start times,
environments; and small file helpers for logs.

Reads /proc where it exists (Linux) and falls back to `ps` elsewhere.  Zombies are
not counted as live: a container whose init does not reap would otherwise make a
stopped group look alive forever.
"""

from __future__ import annotations

import os
import subprocess
import time

from campaign.domain.procstat import PROC as _PROC
from campaign.domain.procstat import start_ticks, stat_fields

__all__ = [
    "complete_utf8_prefix",
    "environ_has",
    "groups_with_env",
    "is_running",
    "live_members",
    "start_ticks",
    "start_time",
    "stat_fields",
    "tail_file",
]


def _ps_table() -> list[tuple[int, int, str]]:
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append((int(parts[0]), int(parts[1]), parts[2]))
    return rows


def live_members(pgid: int) -> set[int]:
    """Pids of the non-zombie processes in group `pgid`."""
    if not _PROC.is_dir():
        return {pid for pid, group, stat in _ps_table() if group == pgid and not stat.startswith("Z")}
    members = set()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.add(int(entry.name))
    return members


def is_running(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    if not _PROC.is_dir():
        return any(p == pid and not stat.startswith("Z") for p, _g, stat in _ps_table())
    fields = stat_fields(pid)
    if not fields:
        return False
    return fields[0] not in ("Z", "X")


def start_time(pid: int) -> float | None:
    """Wall-clock start time of `pid` (seconds since the epoch), None when unknown."""
    fields = stat_fields(pid)
    if fields is not None:
        try:
            btime = next(
                int(line.split()[1]) for line in (_PROC / "stat").read_text().splitlines() if line.startswith("btime ")
            )
        except (StopIteration, OSError):
            return None
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    out = subprocess.run(["ps", "-o", "etime=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    if not out:
        return None
    return time.time() - _parse_etime(out)


def _parse_etime(text: str) -> float:
    """`[[dd-]hh:]mm:ss` as printed by ps."""
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def environ_has(pid: int, entry: str) -> bool:
    """True when the initial environment of `pid` contains `NAME=value` exactly."""
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return entry.encode() in raw.split(b"\0")


def complete_utf8_prefix(data: bytes) -> int:
    """Length of `data` without a trailing, incomplete UTF-8 sequence, so a log read
    that ends mid-character resumes at that character instead of mangling it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return len(data) if need <= back else len(data) - back
    return len(data)


def tail_file(path: str, lines: int, chunk: int = 65536) -> list[str]:
    """The last `lines` lines of a text file (reads from the end, not the whole file)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            data = b""
            pos = size
            while pos > 0 and data.count(b"\n") <= lines:
                step = min(chunk, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    return text[-lines:] if lines > 0 else []


def groups_with_env(entry: str) -> list[int]:
    """Process groups with a live member whose environment holds `entry` (NAME=value):
    how the reaper finds a server its controller died before recording."""
    groups: set[int] = set()
    for proc in _PROC.iterdir():
        if proc.name.isdigit() and environ_has(int(proc.name), entry):
            fields = stat_fields(int(proc.name))
            if fields and fields[0] not in ("Z", "X"):
                groups.add(int(fields[2]))
    return sorted(groups)
