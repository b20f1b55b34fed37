"""The per-campaign run lock: two `campaign run` on one campaign refuse each other.

The lock is a row in the campaign database, taken inside a BEGIN IMMEDIATE
transaction, so it works for every process that opens the same file.  The row
names the holder (owner, pid, host, the pid's start time); a holder on this host
whose process is gone (or whose pid was recycled) is stale and is taken over.

On PostgreSQL the lock is a session-level advisory lock on a dedicated connection held
for the controller's life: the server drops it when that connection ends (a kill -9
included), from any machine.  The row is still written, to name the holder.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from campaign.domain.errors import CampaignLocked
from campaign.domain.procstat import start_ticks
from campaign.store.db import is_postgres, read_session, write_session
from campaign.store.models import RunLockRow


def pid_alive(pid: int, started: str = "") -> bool:
    """True when `pid` runs and (if known) is the same process that took the lock."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    if started and start_ticks(pid) not in ("", started):
        return False
    return True


def holder_is_stale(row: RunLockRow, host: str) -> bool:
    """Only a holder on this host can be checked; a remote holder is assumed alive."""
    return row.host == host and not pid_alive(row.pid, row.pid_started)


#: (engine, campaign id) -> the connection that holds the campaign's advisory lock
_HELD: dict[tuple[int, str], Connection] = {}


def _key(campaign_id: str) -> int:
    """The advisory lock's key: a signed 64-bit hash of the campaign id."""
    return int.from_bytes(hashlib.sha256(campaign_id.encode()).digest()[:8], "big", signed=True)


def _locked(campaign_id: str, row: RunLockRow | None, fix: str) -> CampaignLocked:
    who = "another controller"
    if row is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.acquired_at))
        who = f"{row.owner}, pid {row.pid} on {row.host}, since {since}"
    return CampaignLocked(f"campaign {campaign_id}: already running ({who}) (fix: {fix})")


def _advisory(engine: Engine, campaign_id: str) -> bool:
    """Take the campaign's advisory lock on a connection of its own (autocommit: it holds
    no snapshot), or raise CampaignLocked.  True when taken now, False when this engine
    held it already."""
    if (id(engine), campaign_id) in _HELD:
        return False
    conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _key(campaign_id)}).scalar():
        conn.close()
        with read_session(engine) as session:
            row = session.get(RunLockRow, campaign_id)
        raise _locked(
            campaign_id, row, "wait for it to finish or stop that process; its lock ends with its database connection"
        )
    _HELD[(id(engine), campaign_id)] = conn
    return True


def _drop_advisory(engine: Engine, campaign_id: str) -> None:
    conn: Any = _HELD.pop((id(engine), campaign_id), None)
    if conn is not None:
        try:  # unlocked explicitly: close() returns the connection to the pool, lock and all
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _key(campaign_id)})
        finally:
            conn.invalidate()  # and never reused


def acquire(engine: Engine, campaign_id: str, owner: str, *, force: bool = False) -> None:
    """Take the lock or raise CampaignLocked naming the holder.

    Re-entrant for the same owner in the same process; `force` takes it from any holder
    (not on PostgreSQL: a live holder's advisory lock cannot be taken, a dead one's is gone).
    """
    pid, host = os.getpid(), socket.gethostname()
    # taken now on PostgreSQL: any row is a dead holder's (its lock went with its connection)
    fresh = is_postgres(engine) and _advisory(engine, campaign_id)
    with write_session(engine) as session:
        row = session.get(RunLockRow, campaign_id)
        if row is not None and not force and not fresh:
            same_holder = row.owner == owner and row.pid == pid and row.host == host
            if not same_holder and not holder_is_stale(row, host):
                raise _locked(
                    campaign_id,
                    row,
                    f"wait for it to finish or stop that process; if it is gone, use `campaign unlock {campaign_id}`",
                )
            if same_holder:
                return
        if row is None:
            row = RunLockRow(campaign_id=campaign_id, owner=owner, pid=pid, host=host, acquired_at=time.time())
        row.owner, row.pid, row.host = owner, pid, host
        row.pid_started, row.acquired_at = start_ticks(pid), time.time()
        session.add(row)


def release(engine: Engine, campaign_id: str, owner: str, *, force: bool = False) -> bool:
    """Drop the lock if this owner (in this process) holds it; True if a row was removed."""
    try:
        with write_session(engine) as session:
            row = session.get(RunLockRow, campaign_id)
            if row is None:
                return False
            if not force and (row.owner != owner or row.pid != os.getpid() or row.host != socket.gethostname()):
                return False
            session.delete(row)
            return True
    finally:
        if not force:
            _drop_advisory(engine, campaign_id)


def release_all(engine: Engine) -> None:
    """Close the advisory-lock connections this engine holds (the Store is closing)."""
    for eid, campaign_id in list(_HELD):
        if eid == id(engine):
            _drop_advisory(engine, campaign_id)


def holder(engine: Engine, campaign_id: str) -> RunLockRow | None:
    """The current lock row, stale or not (for `campaign status`)."""
    with read_session(engine) as session:
        row = session.get(RunLockRow, campaign_id)
        if row is not None:
            session.expunge(row)
        return row
