"""Find the server a launch started when the ledger knows only its intent.

A controller killed between spawning a server and writing its pid leaves a ledger
entry with a launch token and no handle; the token is in the server's environment.
Locally the reaper scans `/proc/*/environ`, over ssh the same scan runs on the node,
under Slurm the job is found by its name (`squeue --name`) and proved ours by the
token in its batch script.  Each find returns handles the executor can stop.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from campaign.domain.models import ProcessHandle
from tools.executors import procinfo
from tools.executors.base import LAUNCH_TOKEN_ENV, Executor

__all__ = ["LAUNCH_TOKEN_ENV", "find_by_token"]

#: environment variable carrying a launch's token (set by the launcher, before the spawn).


def find_by_token(executor: Executor, token: str, *, log_path: str, host: str,
                  command: str = "") -> list[ProcessHandle]:
    """Handles of the process groups whose members carry `token`; [] when the spawn
    never happened or the server is gone.  Raises when the node cannot be asked."""
    entry = f"{LAUNCH_TOKEN_ENV}={token}"
    base = {"executor": executor.kind, "host": host, "log_path": log_path, "command": command}
    if executor.kind == "local":
        return [ProcessHandle(**base, pid=g, pgid=g, started_at=procinfo.start_time(g) or 0.0)
                for g in _local_groups(entry)]
    if executor.kind == "slurm":
        return _slurm_jobs(executor, token, log_path, base)
    return [ProcessHandle(**base, pid=g, pgid=g, started_at=0.0) for g in _remote_groups(executor, entry)]


def _local_groups(entry: str) -> list[int]:
    groups: set[int] = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and procinfo.environ_has(int(proc.name), entry):
            fields = procinfo.stat_fields(int(proc.name))
            if fields and fields[0] not in ("Z", "X"):
                groups.add(int(fields[2]))
    return sorted(groups)


def _remote_groups(executor: Executor, entry: str) -> list[int]:
    """The /proc scan, run on the node (its own `sh`, no Python needed)."""
    script = ("for d in /proc/[0-9]*; do "
              f"if tr '\\0' '\\n' < \"$d/environ\" 2>/dev/null | grep -qxF {shlex.quote(entry)}; then "
              "ps -o pgid= -p \"${d#/proc/}\"; fi; done; true")
    res = executor.run(["sh", "-c", script], timeout=60)
    if res.returncode != 0:
        raise RuntimeError(f"token scan on {executor.host} failed: {res.stderr.strip()[:200]}")
    return sorted({int(w) for w in res.stdout.split() if w.isdigit()})


def _slurm_jobs(executor: Executor, token: str, log_path: str, base: dict) -> list[ProcessHandle]:
    prefix = getattr(executor, "job_name_prefix", "campaign")
    workdir = getattr(executor, "workdir", "")
    log_path = log_path if Path(log_path).is_absolute() or not workdir else str(Path(workdir) / log_path)
    name = f"{prefix}-{Path(log_path).stem}"[:64]
    # the executor's own Slurm call: its SLURM_CONF, on the submit host; raises on failure
    jobs = executor._slurm(["squeue", "-h", f"--name={name}", "-o", "%i"]).stdout.split()  # type: ignore[attr-defined]
    try:
        script = Path(log_path + ".sbatch").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if token not in script:
        return []  # a job of that name, but not the launch we lost: not ours
    pid_text = _read(log_path + ".pid")
    pid = int(pid_text) if pid_text.strip().isdigit() and int(pid_text) else None
    return [ProcessHandle(**base, job_id=j, pid=pid, pgid=pid, started_at=0.0) for j in jobs]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""
