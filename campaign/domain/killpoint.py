"""A crash-test hook: SIGKILL this process at a named point, to hit an exact window.

`CAMPAIGN_TEST_KILL_AT=<point>[#k]` kills the process the k-th time (default 1) it
reaches `<point>`; `CAMPAIGN_TEST_TRACE=<file>` appends every point reached to a file
(how the kill bench learns which points a run passes).  Both unset: `reached` returns
at once and nothing else is touched.  Points: `<node>:after` (a graph node returned,
its store writes done, LangGraph has saved nothing of it yet), `<node>:writes` (its
pending writes are saved, the step's checkpoint is not), `launch:spawned` (a server
runs, the ledger knows only the intent), `finish:marked` (the record says finished,
the journal does not yet).
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["KILL_ENV", "TRACE_ENV", "active", "reached"]

KILL_ENV = "CAMPAIGN_TEST_KILL_AT"
TRACE_ENV = "CAMPAIGN_TEST_TRACE"

_lock = threading.Lock()
_counts: dict[str, int] = {}


def active() -> bool:
    """True when a kill point or a trace is asked for (checked when the graph is built)."""
    return bool(os.environ.get(KILL_ENV) or os.environ.get(TRACE_ENV))


def reached(point: str) -> None:
    """Count `point`; trace it; SIGKILL the process when it is the asked occurrence."""
    spec, trace = os.environ.get(KILL_ENV), os.environ.get(TRACE_ENV)
    if not spec and not trace:
        return
    with _lock:
        n = _counts[point] = _counts.get(point, 0) + 1
        if trace:
            fd = os.open(trace, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, f"{point}#{n}\n".encode())
            finally:
                os.close(fd)
        if spec:
            target, _, k = spec.partition("#")
            if target == point and n == int(k or 1):
                os.kill(os.getpid(), signal.SIGKILL)
