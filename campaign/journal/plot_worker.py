"""Plots are drawn in worker processes: the loop never waits on matplotlib.

A journal update hands the plots whose records changed to a small process pool and
returns; the Markdown already names each plot's path (its file appears a moment
later).  Workers are started with "spawn" (never fork a threaded controller) and
import matplotlib once.  `wait_idle()` blocks until every submitted plot is written:
`campaign journal` and the tests call it; at interpreter exit the pool is drained too.

Workers run at the lowest CPU priority (nice 19): they draw while the loop measures the
next experiment, and a server under test (or the load generator driving it) must never
lose CPU to the campaign's own bookkeeping, or the plots would add noise to the figures
they draw.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

__all__ = ["cancel", "draw_inline", "is_pending", "outstanding", "submit", "wait_idle"]

_lock = threading.RLock()  # a future done before its callback is added calls it in `submit`
_pool: ProcessPoolExecutor | None = None
#: plots not yet on disk, and those whose worker raised (`wait_idle` raises it)
_pending: set[Future[Any]] = set()
_paths: dict[str, Future[Any]] = {}


def _workers() -> int:
    return max(1, min(4, (os.cpu_count() or 1)))


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(
            max_workers=_workers(),
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(),),
        )
    return _pool


def _init_worker(parent: int) -> None:
    """In each worker: yield the CPU to anything measured, leave Ctrl-C to the controller
    (a terminal sends it to the whole process group: the controller stops cleanly, and
    `cancel` or its exit stops the workers), and follow the controller."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(19 - os.nice(0))
    _follow_parent(parent)


def _follow_parent(parent: int) -> None:
    """Exit when the controller is gone.  A kill -9 of the controller
    never runs its atexit drain, and an idle worker would wait on its queue forever,
    holding the controller's stdout and ~100 MB of matplotlib."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()


def _draw(kind: str, payload: Any, path: str) -> str:
    """In the worker: draw one figure and replace `path` atomically."""
    from campaign.journal import plots

    if kind == "experiment":
        exp, workloads = payload
        plots.draw_experiment(exp, workloads, Path(path))
        return path
    fig = plots.overview_figure(payload)
    if fig is not None:
        plots.save_figure(fig, Path(path))
    return path


def draw_inline(kind: str, payload: Any, path: str) -> str:
    return _draw(kind, payload, path)


def submit(kind: str, payload: Any, path: str | os.PathLike[str]) -> None:
    """Queue one plot ("experiment": (ExperimentView, workloads); "overview": CampaignView).
    A finished plot leaves the bookkeeping by its own callback: scanning every queued plot
    at each submit made a full render of 1,000 plots quadratic."""
    global _pool
    key = str(path)
    with _lock:
        try:
            fut = _get_pool().submit(_draw, kind, payload, key)
        except BrokenProcessPool:  # a worker died (or cannot start here): draw in this process
            _pool = None
            _draw(kind, payload, key)
            return
        _pending.add(fut)
        _paths[key] = fut
        fut.add_done_callback(lambda f: _finished(key, f))


def _finished(key: str, fut: Future[Any]) -> None:
    with _lock:
        if fut.cancelled() or fut.exception() is None:
            _pending.discard(fut)
        if _paths.get(key) is fut:
            del _paths[key]


def is_pending(path: str | os.PathLike[str]) -> bool:
    """Whether a plot for `path` is queued or being drawn."""
    with _lock:
        fut = _paths.get(str(path))
        return fut is not None and not fut.done()


def wait_idle(timeout: float | None = None) -> None:
    """Block until every submitted plot is on disk; a worker's error is raised here."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
    for fut in pending:
        fut.result(timeout=timeout)


def outstanding() -> int:
    """Plots submitted and not yet on disk."""
    with _lock:
        return sum(1 for f in _pending if not f.done())


def cancel() -> int:
    """Drop every plot not yet drawn and stop the workers (Ctrl-C on `campaign journal`);
    returns how many were dropped.  A worker stopped mid-plot leaves only its temp file,
    which the next journal update removes; the plots missing from disk are drawn then."""
    global _pool
    with _lock:
        dropped = sum(1 for f in _pending if not f.done())
        _pending.clear()
        _paths.clear()
        pool, _pool = _pool, None
    if pool is not None:
        procs = list((getattr(pool, "_processes", None) or {}).values())  # a worker mid-plot: stop it now
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.terminate()
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.join(timeout=5)
        # then shut the pool down for good, so its queues' semaphores are released even
        # when the caller leaves with os._exit (an interrupted run does)
        with contextlib.suppress(Exception):
            pool.shutdown(wait=True, cancel_futures=True)
    return dropped


@atexit.register
def _drain() -> None:
    global _pool
    try:
        with contextlib.suppress(Exception):  # exiting: a failed plot only leaves its file missing
            wait_idle()
        if _pool is not None:
            _pool.shutdown(wait=True)
            _pool = None
    except KeyboardInterrupt:  # Ctrl-C while exiting: drop the rest (the next update draws it)
        cancel()
