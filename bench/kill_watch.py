"""What `kill_anywhere` watches and checks: the controller's process tree, the
database and the journal directory (to time a kill), and the final record.

Processes of a trial are found by a tag in their environment (inherited by every
server the controller starts), so a leftover server is found even after its parent
died and it was re-parented to init.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TAG_ENV = "KILL_ANYWHERE_TRIAL"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def cmdline(pid: int) -> list[str]:
    return [a.decode(errors="replace") for a in _read(f"/proc/{pid}/cmdline").split(b"\0") if a]


def is_server(argv: list[str]) -> bool:
    return "tools.simnode" in argv and "--port" in argv


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _zombie(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]


def tagged_processes(trial_dir: Path, *, servers_only: bool = False, no_servers: bool = False) -> list[tuple[int, str]]:
    """(pid, command) of every live process of the trial: carrying its tag, or running in
    its directory.  Servers start from a minimal environment (no tag: the campaign drops
    what they did not ask for), but the launcher starts them in the trial's directory."""
    tag = f"{TAG_ENV}={trial_dir}".encode()
    root = str(trial_dir.resolve())
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        if tag not in _read(f"/proc/{entry}/environ").split(b"\0") and not _inside(_cwd(int(entry)), root):
            continue
        if _zombie(int(entry)):
            continue
        argv = cmdline(int(entry))
        if not argv or (servers_only and not is_server(argv)) or (no_servers and is_server(argv)):
            continue
        out.append((int(entry), " ".join(argv)[:160]))
    return out


def wait_gone(trial_dir: Path, timeout_s: float, *, no_servers: bool = False) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = tagged_processes(trial_dir, no_servers=no_servers)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


class Watch:
    """Counters of what a running controller has done so far, polled cheaply."""

    def __init__(self, pid: int, db: Path, journal_dir: Path) -> None:
        self.pid = pid
        self.db = db
        self.journal_dir = journal_dir
        self.servers: dict[int, int] = {}  # pid -> port, in order of appearance
        self._con: sqlite3.Connection | None = None
        self._records = 0
        self._inodes: set[int] = set()
        self._activity: set[tuple[str, int]] = set()  # (tmp or plot file, mtime) seen
        self._activity_at_write: int = 0

    # -- process tree ------------------------------------------------------------
    def _children(self) -> list[int]:
        """Children of every thread: the graph runs nodes on worker threads, and a
        child is listed under the thread that started it."""
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return []
        return [int(x) for tid in tids for x in _read(f"/proc/{self.pid}/task/{tid}/children").split()]

    def server_count(self) -> int:
        for child in self._children():
            if child not in self.servers:
                argv = cmdline(child)
                if is_server(argv):
                    self.servers[child] = int(argv[argv.index("--port") + 1])
        return len(self.servers)

    def newest_server_serving(self) -> bool:
        if not self.servers:
            return False
        port = list(self.servers.values())[-1]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.05):
                return True
        except OSError:
            return False

    # -- database ----------------------------------------------------------------
    def records(self) -> int:
        """Experiments that reached finished/failed (the record node ran)."""
        if self._con is None:
            if not self.db.exists():
                return self._records
            self._con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1)
        try:
            row = self._con.execute("SELECT count(*) FROM experiments WHERE status IN ('finished','failed')").fetchone()
            self._records = max(self._records, row[0])
        except sqlite3.Error:
            pass
        return self._records

    # -- journal -----------------------------------------------------------------
    def journal_writes(self) -> int:
        """Publishes of the journal begun: a new plot or temp file, or a replaced journal."""
        try:
            entries = list(os.scandir(self.journal_dir))
        except OSError:
            return 0
        for e in entries:
            try:
                st = e.stat()
            except OSError:
                continue
            if e.name.endswith(".md") and not e.name.startswith("."):
                if st.st_ino not in self._inodes:
                    self._inodes.add(st.st_ino)
                    self._activity_at_write = len(self._activity)
            elif e.name.endswith(".tmp"):
                self._activity.add((e.name, st.st_mtime_ns))
            elif e.is_dir():
                for p in _scan(e.path):
                    self._activity.add(p)
        # the current publish counts once it shows activity past the last replaced journal
        started = 1 if len(self._activity) > self._activity_at_write else 0
        return len(self._inodes) + started

    def until(self, cond: Callable[[], bool], proc, interval: float = 0.005) -> bool:
        """Poll `cond` until it holds (True) or the controller exits (False)."""
        while proc.poll() is None:
            if cond():
                return True
            time.sleep(interval)
        self.server_count()
        self.records()
        self.journal_writes()
        return False


def _scan(path: str) -> list[tuple[str, int]]:
    out = []
    try:
        for e in os.scandir(path):
            try:
                out.append((e.path, e.stat().st_mtime_ns))
            except OSError:
                continue
    except OSError:
        pass
    return out


def ledger_live(path: Path) -> int:
    if not path.exists():
        return 0
    from tools.server.ledger import ProcessLedger

    ledger = ProcessLedger(path)
    return len(ledger.live()) + len(ledger.intents())


def read_only(db: Path | str) -> Any:
    """A connection with sqlite3's `execute` on the record: the file read-only, or a
    PostgreSQL URL (campaign.store.dialect translates the SQL)."""
    if "://" in str(db):
        import psycopg

        from campaign.store.dialect import PgConn

        return PgConn(psycopg.connect(str(db), autocommit=True))
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def finished_experiments(db: Path | str, names: list[str]) -> list[str]:
    """Problems with the final record: one finished experiment with a verdict per
    hypothesis, other attempts stale, no run twice, nothing left running."""
    if isinstance(db, Path) and not db.exists():
        return ["no database"]
    con = read_only(db)
    problems: list[str] = []
    try:
        camps = con.execute("SELECT id, status FROM campaigns").fetchall()
        if len(camps) != 1:
            return [f"{len(camps)} campaigns in the database, expected 1"]
        cid, status = camps[0]
        if status != "finished":
            problems.append(f"campaign status {status}")
        rows = con.execute(
            "SELECT e.id, e.hypothesis, e.status, e.role, v.kind FROM experiments e "
            "LEFT JOIN verdicts v ON v.experiment_id = e.id WHERE e.campaign_id = ?",
            (cid,),
        ).fetchall()
        for name in names:
            mine = [r for r in rows if r[1] == name]
            done = [r for r in mine if r[2] in ("finished", "failed")]
            if len(done) != 1:
                problems.append(f"{name}: {len(done)} finished experiments ({[r[2] for r in mine]})")
            elif done[0][4] is None:
                problems.append(f"{name}: finished without a verdict")
            other = [r[2] for r in mine if r not in done and r[2] != "stale"]
            if other:
                problems.append(f"{name}: other attempts not stale: {other}")
        base = [r for r in rows if r[3] == "baseline"]
        if not any(r[2] == "finished" for r in base):
            problems.append("no finished baseline")
        if any(r[2] == "running" for r in rows):
            problems.append("experiments left running: " + ", ".join(r[0] for r in rows if r[2] == "running"))
        verdict_on_unfinished = [r[0] for r in rows if r[4] is not None and r[2] not in ("finished", "failed")]
        if verdict_on_unfinished:
            problems.append(f"verdicts on unfinished experiments: {verdict_on_unfinished}")
        # one packed row per side and round (store schema 2): a second write of a round shows here
        dups = con.execute(
            "SELECT experiment_id, side, repeat, count(*) FROM run_sides GROUP BY 1, 2, 3 HAVING count(*) > 1"
        ).fetchall()
        if dups:
            problems.append(f"runs recorded twice: {dups[:3]}")
        hyps = con.execute("SELECT name, status FROM hypotheses WHERE campaign_id = ?", (cid,)).fetchall()
        not_done = [(n, s) for n, s in hyps if s != "done"]
        if not_done:
            problems.append(f"hypotheses not done: {not_done}")
    finally:
        con.close()
    return problems


def _environ(pid: int) -> dict[str, str]:
    out = {}
    for item in _read(f"/proc/{pid}/environ").split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def unledgered_servers(trial_dir: Path, ledger: Path) -> list[int]:
    """Live servers of the trial that the ledger knows neither by pid nor by launch token:
    a kill between the spawn and the ledger write, nothing could ever reap them."""
    from tools.executors.base import LAUNCH_TOKEN_ENV
    from tools.server.ledger import ProcessLedger

    book = ProcessLedger(ledger)
    pids = {h.pid for h in book.live()}
    tokens = set(book.intents())
    out = []
    for pid, _cmd in tagged_processes(trial_dir, servers_only=True):
        if pid not in pids and _environ(pid).get(LAUNCH_TOKEN_ENV) not in tokens:
            out.append(pid)
    return out


def record_facts(db: Path | str) -> dict[str, int]:
    """Review gates requested, stale experiments, and stale experiments holding a
    complete round (a finished round thrown away and measured again)."""
    con = read_only(db)
    try:
        reviews = con.execute("SELECT count(*) FROM reviews").fetchone()[0]
        kinds = [
            k
            for (k,) in con.execute(
                "SELECT v.kind FROM experiments e JOIN verdicts v ON v.experiment_id = e.id "
                "WHERE e.role = 'candidate' AND e.status IN ('finished', 'failed') ORDER BY e.finished_at"
            )
        ]
        stale = con.execute("SELECT id, role FROM experiments WHERE status = 'stale'").fetchall()
        redone = 0
        for eid, role in stale:
            sides = con.execute(
                "SELECT repeat, count(DISTINCT side) FROM run_sides WHERE experiment_id = ? GROUP BY repeat", (eid,)
            ).fetchall()
            redone += int(any(n >= (1 if role == "baseline" else 2) for _r, n in sides))
    except sqlite3.Error:
        return {"reviews": -1, "expected_reviews": -2, "stale": -1, "redone_rounds": -1}
    finally:
        con.close()
    return {
        "reviews": reviews,
        "expected_reviews": expected_gates(kinds, REVIEW_AFTER),
        "stale": len(stale),
        "redone_rounds": redone,
    }


#: the bench playbook's `review.after_no_win_streak`
REVIEW_AFTER = 2


def expected_gates(kinds: list[str], after: int) -> int:
    """Review gates the verdicts in finish order call for: the no-win streak replayed
    from the record (a win or a gate starts it again)."""
    gates = streak = 0
    for kind in kinds:
        streak = 0 if kind == "win" else streak + 1
        if streak >= after:
            gates, streak = gates + 1, 0
    return gates
