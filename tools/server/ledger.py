"""A process ledger: every server handle a run started, until it is stopped.

A launch is written in two steps around the spawn: the intent (command, log path,
a unique token placed in the server's environment) before, the pid right after, so
no kill can leave a server the ledger does not know.

A controller killed with -9 cannot stop its servers; the next run (resume) reads the
ledger and reaps what is left, so a crash never leaves a GPU server holding a node.
The file is JSON lines, appended with one write per event (a line torn by a crash is
skipped), and compacted after a reap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from campaign.domain.models import ProcessHandle
from tools.executors.base import Executor
from tools.executors.procinfo import start_ticks


def handle_key(handle: ProcessHandle) -> str:
    """Identity of a handle across processes."""
    return f"{handle.executor}|{handle.host}|{handle.pid}|{handle.job_id}|{handle.started_at!r}"


class ProcessLedger:
    """Append-only record of started handles; `live()` is started minus stopped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def intend(self, token: str, *, executor: str, host: str, log_path: str, command: str = "") -> None:
        """Record a launch before its spawn: a kill between the spawn and `record` leaves
        this entry, and the reaper finds the server by `token` (in its environment)."""
        handle = ProcessHandle(executor=executor, host=host, log_path=log_path, command=command)
        self._append(
            {
                "op": "intent",
                "key": _intent_key(token),
                "token": token,
                "handle": handle.model_dump(mode="json"),
                "owner": _owner(),
            }
        )

    def forget(self, token: str) -> None:
        """The launch ended before a server ran (its spawn raised): drop the intent."""
        self._append({"op": "stop", "key": _intent_key(token)})

    def record(self, handle: ProcessHandle, *, token: str | None = None) -> None:
        """Record a started handle with its owner (this controller), so that another
        controller never reaps a server whose owner is still alive; it replaces the
        launch's intent."""
        event = {"op": "start", "key": handle_key(handle), "handle": handle.model_dump(mode="json"), "owner": _owner()}
        self._append({**event, "token": token} if token else event)

    def remove(self, handle: ProcessHandle) -> None:
        self._append({"op": "stop", "key": handle_key(handle)})

    def live(self) -> list[ProcessHandle]:
        """Handles recorded as started and not recorded as stopped, oldest first."""
        return [ProcessHandle.model_validate(e["handle"]) for e in self._live_events() if e.get("op") == "start"]

    def intents(self) -> list[str]:
        """Tokens of launches whose pid was never recorded (and not forgotten)."""
        return [e["token"] for e in self._live_events() if e.get("op") == "intent"]

    def _live_events(self) -> list[dict[str, Any]]:
        started: dict[str, dict[str, Any]] = {}
        for event in self._events():
            op = event.get("op")
            if op in ("start", "intent") and "handle" in event:
                started[event["key"]] = event
                if op == "start" and event.get("token"):
                    started.pop(_intent_key(event["token"]), None)
            elif op == "stop":
                started.pop(event.get("key", ""), None)
        return list(started.values())

    def reap(self, executor_for: Callable[[ProcessHandle], Executor], *, grace_s: float = 10.0) -> list[ProcessHandle]:
        """Stop every leftover handle (through the executor `executor_for(handle)` picks),
        and every server of a launch known only by its intent (found by its token),
        then compact the ledger; returns the handles that were reaped.  An entry whose
        stop (or search) raised stays in the ledger for the next try."""
        reaped: list[ProcessHandle] = []
        kept: list[dict[str, Any]] = []
        for event in self._live_events():
            handle = ProcessHandle.model_validate(event["handle"])
            if _owner_alive(event.get("owner")):
                kept.append(event)  # another live controller's server: not a leftover
                continue
            try:
                executor = executor_for(handle)
                found = (
                    [handle]
                    if event["op"] == "start"
                    else executor.find_by_token(
                        event["token"], log_path=handle.log_path, host=handle.host, command=handle.command
                    )
                )
                for h in found:
                    executor.stop(h, grace_s=grace_s)
            except Exception:  # an unreachable node: keep the entry, try again next time
                kept.append(event)
                continue
            reaped += found
        self._rewrite(kept)
        return reaped

    # -- file -----------------------------------------------------------------------
    def _append(self, event: dict[str, Any]) -> None:
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _events(self) -> list[dict[str, Any]]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        events = []
        for line in raw.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # torn by a crash mid-write
            if isinstance(event, dict):
                events.append(event)
        return events

    def _rewrite(self, events: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.unlink(missing_ok=True)  # a killed rewrite's: never write into a file found there
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for event in events:
                f.write(json.dumps(event, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def _intent_key(token: str) -> str:
    return f"intent|{token}"


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "started": start_ticks(os.getpid())}


def _owner_alive(owner: dict[str, Any] | None) -> bool:
    """True when the controller that recorded an entry still runs (and is not us)."""
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or owner["pid"] == os.getpid():
        return False
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{owner['pid']}/stat").read_text()
        if stat[stat.rfind(")") + 2 :][:1] in ("Z", "X"):
            return False  # killed, not yet waited for by its parent
    except OSError:
        pass
    started = owner.get("started") or ""
    return not started or start_ticks(owner["pid"]) in ("", started)
