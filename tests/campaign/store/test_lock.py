"""Two `campaign run` on one campaign refuse each other; a dead holder's lock is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from campaign.domain.errors import CampaignLocked, UserError
from campaign.store import Store
from campaign.store.lock import holder_is_stale
from campaign.store.models import RunLockRow
from tools.executors.procinfo import start_ticks as pid_start_time

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}


@pytest.fixture()
def db_and_id(backend_db: str) -> tuple[str, str]:
    """SQLite's lock row and PostgreSQL's advisory lock keep the same promises."""
    db = backend_db
    with Store(db) as store:
        return db, store.create_campaign("demo", playbook=PLAYBOOK).id


def test_second_runner_is_refused_until_the_first_releases(db_and_id: tuple[str, str]) -> None:
    db, cid = db_and_id
    first, second = Store(db), Store(db)
    first.acquire_run_lock(cid, "campaign run A")
    first.acquire_run_lock(cid, "campaign run A")  # re-entrant for the same owner
    with pytest.raises(CampaignLocked) as err:
        second.acquire_run_lock(cid, "campaign run B")
    assert isinstance(err.value, UserError)
    msg = str(err.value)
    assert cid in msg and "campaign run A" in msg and f"pid {os.getpid()}" in msg and "fix:" in msg
    assert not second.release_run_lock(cid, "campaign run B")  # not the holder: nothing released
    assert first.release_run_lock(cid, "campaign run A")
    second.acquire_run_lock(cid, "campaign run B")
    holder = second.lock_holder(cid)
    assert holder is not None and holder.owner == "campaign run B"


def test_run_lock_context_releases_on_error(db_and_id: tuple[str, str]) -> None:
    db, cid = db_and_id
    store = Store(db)
    with pytest.raises(RuntimeError), store.run_lock(cid, "campaign run"):
        assert store.lock_holder(cid) is not None
        raise RuntimeError("node crashed")
    assert store.lock_holder(cid) is None
    with pytest.raises(UserError, match="campaign status"):
        store.acquire_run_lock("nope", "campaign run")


def test_live_process_holds_it_and_its_death_frees_it(db_and_id: tuple[str, str]) -> None:
    db, cid = db_and_id
    child = textwrap.dedent(
        f"""
        import sys
        from campaign.store import Store
        Store({db!r}).acquire_run_lock({cid!r}, "campaign run (child)")
        print("locked", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        store = Store(db)
        with pytest.raises(CampaignLocked, match=f"pid {proc.pid}"):
            store.acquire_run_lock(cid, "campaign run (parent)")
    finally:
        proc.send_signal(signal.SIGKILL)  # dies without releasing
        proc.wait(timeout=30)
    store.acquire_run_lock(cid, "campaign run (parent)")  # stale: taken over
    holder = store.lock_holder(cid)
    assert holder is not None and holder.pid == os.getpid() and holder.owner == "campaign run (parent)"


def test_recycled_pid_and_remote_holders() -> None:
    me = os.getpid()
    row = RunLockRow(campaign_id="c", owner="o", pid=me, host="here", pid_started=pid_start_time(me), acquired_at=0.0)
    assert not holder_is_stale(row, "here")
    recycled = row.model_copy(update={"pid_started": "1"})  # same pid, another process start time
    assert holder_is_stale(recycled, "here")
    assert not holder_is_stale(recycled, "elsewhere")  # a remote holder cannot be checked: assumed alive


def test_force_takes_a_remote_holders_lock(db_and_id: tuple[str, str]) -> None:
    db, cid = db_and_id
    store = Store(db)
    store.acquire_run_lock(cid, "campaign run A")
    with pytest.raises(CampaignLocked):
        store.acquire_run_lock(cid, "campaign run B")
    store.acquire_run_lock(cid, "campaign run B", force=True)
    assert store.lock_holder(cid).owner == "campaign run B"  # type: ignore[union-attr]
