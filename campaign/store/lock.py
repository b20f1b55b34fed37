"""The per-campaign run lock: two `campaign run` on one campaign refuse each other.

The lock is a row in the campaign database, taken inside a BEGIN IMMEDIATE
transaction, so it works for every process that opens the same file.  The row
names the holder (owner, pid, host, the pid's start time); a holder on this host
whose process is gone (or whose pid was recycled) is stale and is taken over.
"""

from __future__ import annotations

import os
import socket
import time

from sqlalchemy.engine import Engine

from campaign.domain.errors import CampaignLocked
from campaign.domain.procstat import start_ticks
from campaign.store.db import read_session, write_session
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


def acquire(engine: Engine, campaign_id: str, owner: str, *, force: bool = False) -> None:
    """Take the lock or raise CampaignLocked naming the holder.

    Re-entrant for the same owner in the same process; `force` takes it from any holder.
    """
    pid, host = os.getpid(), socket.gethostname()
    with write_session(engine) as session:
        row = session.get(RunLockRow, campaign_id)
        if row is not None and not force:
            same_holder = row.owner == owner and row.pid == pid and row.host == host
            if not same_holder and not holder_is_stale(row, host):
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.acquired_at))
                raise CampaignLocked(
                    f"campaign {campaign_id}: already running ({row.owner}, pid {row.pid} on {row.host}, since {since}) "
                    f"(fix: wait for it to finish or stop that process; if it is gone, use `campaign unlock {campaign_id}`)"
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
    with write_session(engine) as session:
        row = session.get(RunLockRow, campaign_id)
        if row is None:
            return False
        if not force and (row.owner != owner or row.pid != os.getpid() or row.host != socket.gethostname()):
            return False
        session.delete(row)
        return True


def holder(engine: Engine, campaign_id: str) -> RunLockRow | None:
    """The current lock row, stale or not (for `campaign status`)."""
    with read_session(engine) as session:
        row = session.get(RunLockRow, campaign_id)
        if row is not None:
            session.expunge(row)
        return row
