"""Run the campaign's servers as Slurm batch jobs.

Each long-lived process is one batch job (`sbatch --parsable`) whose script execs
the watcher (remote_shell.WATCHER): the command's pid, pgid and exit status land
next to the Slurm output file, which is the log.  Jobs are followed with `squeue`
and `scontrol show job` only: many clusters run without accounting, so no `sacct`.
`start` returns once the job left the queue, so the handle carries the node address
(from BatchHost) that the controller reaches the server at, and the queue wait is
measured (`queue_wait_s`).

Decisions: the controller runs on a submit host that shares the filesystem with the
nodes (the usual Slurm setup), so logs are read and files copied directly, and short
`run` commands are local subprocesses there (`run_mode="srun"` runs them in a short
allocation instead: it queues, so it is not the default).  `free_port` binds on the
submit host: with an exclusive node (the default) a port free there is free on the
node in practice, and a clash surfaces as `port_in_use`, an infrastructure failure
the campaign retries.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from campaign.domain import server_env
from campaign.domain.errors import UserError
from campaign.domain.models import CommandResult, ProcessHandle
from campaign.domain.redact import redact_argv
from campaign.domain.server_env import DEFAULT_BASE_ENV
from campaign.playbook.nodes import NodeSpecBase, SimulatedNodeSpec
from tools.executors.base import LAUNCH_TOKEN_ENV, NodeError
from tools.executors.local import LocalExecutor
from tools.executors.remote_shell import (
    KILLED,
    ensure_private_dir,
    env_spec_bytes,
    env_spec_path,
    parse_status,
    pid_path,
    rc_path,
    watcher_argv,
    write_private,
)

#: job states in which the job may still run its command.
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
    }
)
WAITING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


class SlurmNodeSpec(NodeSpecBase):
    remote: ClassVar[bool] = True
    kind: Literal["slurm"] = Field(description="each launch is a Slurm batch job", examples=["slurm"])
    name: str = Field(default="slurm", description="the node's name in the record and the journal")
    partition: str | None = Field(
        default=None, description="sbatch --partition (default: the cluster's)", examples=["gpu"]
    )
    gres: str | None = Field(default="gpu:8", description="sbatch --gres")
    gpus: int | None = Field(default=None, description="sbatch --gpus, instead of gres", examples=[8])
    time_limit: str = Field(default="01:00:00", description="sbatch --time for one launch's job")
    exclusive: bool = Field(default=True, description="sbatch --exclusive: no other job shares the node")
    max_parallel_jobs: int = Field(default=1, description="accepted but not used yet: one job per launch")
    workdir: str = Field(
        default="~/.cache/campaign-slurm",
        description="a directory the controller and the "
        "compute nodes share: batch scripts, logs, the environment file of a launch; made 0700, "
        "refused when another user's or writable by others",
    )
    python: str = Field(
        default="python3", description="the interpreter on the compute node that runs campaign's node helpers"
    )
    simulated: SimulatedNodeSpec | None = Field(
        default=None, description="run the simulated node in the job instead of a real engine"
    )

    @field_validator("max_parallel_jobs")
    @classmethod
    def _one_job(cls, v: int) -> int:
        # One node runs one experiment, so one job, at a time; parallelism is one node per
        # experiment (`nodes:`), which the fan-out already does.  Any other value would be ignored.
        if v != 1:
            raise ValueError(
                "a slurm node runs one job at a time (fix: remove it; to run experiments at once, "
                "list one slurm node per job under `nodes:`, each with its own name)"
            )
        return v

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self.simulated

    def where(self) -> str:
        executor = SlurmExecutor.from_spec(self)
        submit = " ".join(
            executor.submit_argv("<log>.sbatch", log_path="<log>", job_name="campaign-<label>", cwd=executor.workdir)
        )
        return (
            f"slurm: each launch is one batch job, `{submit}`; the job script runs the command below "
            f"on the node Slurm picks (its env in a private file, never on a command line)"
        )


class SlurmError(NodeError):
    """sbatch/scontrol/scancel failed, or a job did not leave the queue in time."""


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show ... -o` output (Key=Value words) as a dict; the first value wins."""
    fields: dict[str, str] = {}
    for key, value in re.findall(r"(\w+)=(\S*)", text):
        fields.setdefault(key, value)
    return fields


def status_from_job(fields: dict[str, str]) -> int:
    """Exit status of an ended job without a watcher record, in subprocess convention."""
    code, _, sig = fields.get("ExitCode", "0:0").partition(":")
    if sig and sig != "0":
        return -int(sig)
    if fields.get("JobState") in {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"} and code == "0":
        return -15
    return int(code or 0)


class SlurmExecutor:
    """An `Executor` whose long-lived processes are Slurm batch jobs."""

    kind = "slurm"

    def __init__(
        self,
        partition: str | None = None,
        gres: str | None = "gpu:8",
        gpus: int | None = None,
        time_limit: str = "01:00:00",
        exclusive: bool = True,
        workdir: str = "~/.cache/campaign-slurm",
        python: str = "python3",
        slurm_conf: str | None = None,
        job_name_prefix: str = "campaign",
        queue_timeout_s: float = 3600.0,
        run_mode: Literal["local", "srun"] = "local",
    ) -> None:
        self.partition, self.gres, self.gpus = partition, gres, gpus
        self.time_limit, self.exclusive = time_limit, exclusive
        self.workdir_setting = os.path.expanduser(workdir)
        self._workdir: str | None = None  # checked on first use
        self.python, self.job_name_prefix = python, job_name_prefix
        self.queue_timeout_s, self.run_mode = queue_timeout_s, run_mode
        # every Slurm client call (srun steps included: Slurm copies the caller's environment
        # into the step) gets the base list only, never the controller's credentials
        self._env = server_env.select(os.environ, DEFAULT_BASE_ENV)
        if slurm_conf:
            self._env["SLURM_CONF"] = slurm_conf
        self._local = LocalExecutor()
        self._queue_wait: dict[str, float] = {}
        self._last_host: str | None = None

    @classmethod
    def from_spec(cls, spec: SlurmNodeSpec) -> SlurmExecutor:
        """The registry's builder; UserError for a GPU count sbatch would refuse."""
        if spec.gpus is not None and spec.gpus < 1:
            raise UserError(f"playbook: node.gpus: {spec.gpus} (fix: a positive GPU count, or remove it)")
        return cls(
            partition=spec.partition,
            gres=spec.gres,
            gpus=spec.gpus,
            time_limit=spec.time_limit,
            exclusive=spec.exclusive,
            workdir=spec.workdir,
            python=spec.python,
        )

    @property
    def workdir(self) -> str:
        """The shared workdir, made 0700 on first use; refused when it is another user's,
        a link or writable by others (see remote_shell.ensure_private_dir)."""
        if self._workdir is None:
            problem = ensure_private_dir(self.workdir_setting)
            if problem:
                raise UserError(f"slurm: {problem}")
            self._workdir = self.workdir_setting
        return self._workdir

    # ----------------------------------------------------------------- slurm calls
    def _slurm(
        self, argv: list[str], timeout: float = 60.0, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            argv, env=self._env if env is None else env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise SlurmError(f"{' '.join(argv[:2])}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def job_info(self, job_id: str) -> dict[str, str] | None:
        """`scontrol show job` fields; None once Slurm forgot the job (after MinJobAge)."""
        proc = self._slurm(["scontrol", "show", "job", "-o", job_id], check=False)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:
                return None
            raise SlurmError(f"scontrol show job {job_id}: {proc.stderr.strip()}")
        return parse_scontrol(proc.stdout)

    def in_queue(self, job_id: str) -> bool:
        """Is the job listed by `squeue` (pending, running or completing)?"""
        proc = self._slurm(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False)
        return proc.returncode == 0 and bool(proc.stdout.strip())

    def node_address(self, node: str) -> str:
        fields = parse_scontrol(self._slurm(["scontrol", "show", "node", "-o", node]).stdout)
        return fields.get("NodeAddr") or node

    def submit_argv(self, script: str, *, log_path: str, job_name: str, cwd: str) -> list[str]:
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={job_name}",
            f"--output={log_path}",
            "--open-mode=append",
            f"--chdir={cwd}",
            f"--time={self.time_limit}",
        ]
        argv += [f"--partition={self.partition}"] if self.partition else []
        argv += [f"--gres={self.gres}"] if self.gres else []
        argv += [f"--gpus={self.gpus}"] if self.gpus else []
        argv += ["--exclusive"] if self.exclusive else []
        return argv + [script]

    # ----------------------------------------------------------------- Executor
    @property
    def host(self) -> str:
        """The node of the last job; before any job, the partition's first node."""
        if self._last_host is None:
            args = ["sinfo", "-h", "-o", "%N"] + ([f"--partition={self.partition}"] if self.partition else [])
            nodes = self._slurm(args).stdout.split()
            names = self._slurm(["scontrol", "show", "hostnames", nodes[0]]).stdout.split() if nodes else []
            self._last_host = self.node_address(names[0]) if names else "127.0.0.1"
        return self._last_host

    def run(
        self, argv: list[str], *, timeout: float = 60.0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        """On the submit host (shared filesystem); in a short `srun` allocation with run_mode="srun"."""
        if self.run_mode == "srun":
            alloc = ["srun", "--quiet", "-N1", "-n1", f"--time={self.time_limit}"]
            alloc += [f"--partition={self.partition}"] if self.partition else []
            argv = alloc + list(argv)
            env = {"SLURM_CONF": self._env.get("SLURM_CONF", ""), **(env or {})} if "SLURM_CONF" in self._env else env
        return self._local.run(argv, timeout=timeout, env=env, cwd=cwd)

    def start(
        self,
        argv: list[str],
        *,
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        base_env: Sequence[str] | None = None,
    ) -> ProcessHandle:
        """Submit a batch job and wait until it runs (or ended); SlurmError when it is
        still queued after `queue_timeout_s` (the job is cancelled then).

        The job's environment: sbatch gets only the base list's variables (Slurm copies
        the submitter's environment into the job and its state files), and `env` goes
        into a 0600 file in a 0700 directory that the script names and the watcher
        reads and deletes before it starts the command; deleted here too, whatever
        happened to the job."""
        log = log_path if os.path.isabs(log_path) else os.path.join(self.workdir, log_path)
        workdir = cwd or self.workdir
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(self.workdir).mkdir(parents=True, exist_ok=True)
        for stale in (rc_path(log), pid_path(log)):
            Path(stale).unlink(missing_ok=True)
        script = log + ".sbatch"
        spec = write_private(env_spec_path(self.workdir, log), env_spec_bytes(env, base_env))
        try:
            watcher = watcher_argv(self.python, argv, log_path=log, env_spec=spec, cwd=workdir, linger=True)
            # the launch token (a random id, not a secret) marks the script as this launch's,
            # since the environment itself goes through the private file
            token = (env or {}).get(LAUNCH_TOKEN_ENV, "")
            mark = f"# {LAUNCH_TOKEN_ENV} {shlex.quote(token)}\n" if token else ""
            Path(script).write_text(f"#!/bin/sh\n{mark}exec {shlex.join(watcher)}\n")
            job_name = f"{self.job_name_prefix}-{Path(log).stem}"[:64]
            submitted = time.monotonic()
            out = self._slurm(
                self.submit_argv(script, log_path=log, job_name=job_name, cwd=workdir), env=self._submit_env(base_env)
            ).stdout
            job_id = out.strip().split(";")[0]
            fields = self._wait_started(job_id, submitted)
            self._queue_wait[job_id] = time.monotonic() - submitted
            pid = self._wait_pid(log, job_id)
        finally:
            Path(spec).unlink(missing_ok=True)
        node = fields.get("BatchHost") or fields.get("NodeList") or ""
        host = self.node_address(node) if node and node != "(null)" else self.host
        self._last_host = host
        return ProcessHandle(
            executor=self.kind,
            pid=pid,
            pgid=pid,
            host=host,
            job_id=job_id,
            log_path=log,
            started_at=time.time(),
            command=redact_argv(argv, env),
        )

    def _submit_env(self, base_env: Sequence[str] | None) -> dict[str, str]:
        """sbatch's own environment, which becomes the job's: the base list's variables
        of the submit host (as they are now) and where Slurm's configuration is."""
        env = server_env.select(os.environ, DEFAULT_BASE_ENV if base_env is None else base_env)
        if "SLURM_CONF" in self._env:
            env["SLURM_CONF"] = self._env["SLURM_CONF"]
        return env

    def _wait_started(self, job_id: str, submitted: float) -> dict[str, str]:
        while True:
            fields = self.job_info(job_id) or {"JobState": "GONE"}
            if fields.get("JobState") not in WAITING_STATES:
                return fields
            if time.monotonic() - submitted > self.queue_timeout_s:
                self._slurm(["scancel", job_id], check=False)
                raise SlurmError(
                    f"job {job_id} still queued after {self.queue_timeout_s:g} s "
                    f"(reason {fields.get('Reason', '?')}); cancelled"
                )
            time.sleep(0.1)

    def _wait_pid(self, log: str, job_id: str, timeout: float = 30.0) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = _read(pid_path(log))
            if text.strip():
                return int(text) or None
            if not self.in_queue(job_id):
                return None
            time.sleep(0.05)
        return None

    def queue_wait_s(self, handle: ProcessHandle) -> float | None:
        """Seconds from submission to RUNNING: measured by `start`, else from scontrol
        (whole seconds) for a handle another executor started."""
        if handle.job_id in self._queue_wait:
            return self._queue_wait[handle.job_id]
        fields = self.job_info(handle.job_id) if handle.job_id else None
        if fields is None:
            return None
        try:
            return (
                datetime.fromisoformat(fields["StartTime"]) - datetime.fromisoformat(fields["SubmitTime"])
            ).total_seconds()
        except (KeyError, ValueError):
            return None

    def poll(self, handle: ProcessHandle) -> int | None:
        status = parse_status(_read(rc_path(handle.log_path)))
        if status is not None:
            return status
        fields = self.job_info(handle.job_id) if handle.job_id else None
        if fields is not None and fields.get("JobState") in ACTIVE_STATES:
            return None
        status = parse_status(_read(rc_path(handle.log_path)))  # written before the job ended
        if status is not None:
            return status
        return KILLED if fields is None else status_from_job(fields)

    def read_log(self, handle: ProcessHandle, offset: int = 0) -> tuple[str, int]:
        return self._local.read_log(handle, offset)

    def tail(self, handle: ProcessHandle, lines: int = 50) -> list[str]:
        return self._local.tail(handle, lines)

    def stop(self, handle: ProcessHandle, *, grace_s: float = 10.0) -> int | None:
        """TERM the command's process group on the node, KILL it after `grace_s`, then
        cancel and wait until the job left the queue (its GPUs are free again).

        The group is signalled from a step inside the job (`srun --overlap`): Slurm's
        own tracking misses processes re-parented to init (proctrack/linuxproc), and
        the watcher keeps the job alive while the group has members, so "the job left
        the queue" means "the group is empty"."""
        job = handle.job_id
        if job and self.in_queue(job):
            self._signal_group(handle, "TERM")
            self._slurm(["scancel", "--signal=TERM", "--full", job], check=False)
            if not self._wait_gone(job, grace_s):
                self._signal_group(handle, "KILL")
                if not self._wait_gone(job, 10.0):
                    self._slurm(["scancel", "--signal=KILL", "--full", job], check=False)
            self._slurm(["scancel", job], check=False)
            if not self._wait_gone(job, 60.0):
                raise SlurmError(f"job {job} still in the queue 60 s after scancel")
        Path(env_spec_path(self.workdir, handle.log_path)).unlink(missing_ok=True)  # a job that never ran
        return self.poll(handle)

    def _signal_group(self, handle: ProcessHandle, signal_name: str) -> None:
        pgid = handle.pgid or handle.pid
        if not pgid or not handle.job_id:
            return
        self._slurm(
            [
                "srun",
                f"--jobid={handle.job_id}",
                "--overlap",
                "-N1",
                "-n1",
                "--quiet",
                "kill",
                f"-{signal_name}",
                "--",
                f"-{pgid}",
            ],
            timeout=60,
            check=False,
        )

    def _wait_gone(self, job_id: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.in_queue(job_id):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def put(self, local_path: str, remote_path: str) -> None:
        self._local.put(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        self._local.get(remote_path, local_path)

    def free_port(self) -> int:
        return self._local.free_port()

    def find_by_token(self, token: str, *, log_path: str, host: str, command: str = "") -> list[ProcessHandle]:
        """The job is found by its name (`squeue --name`) and proved this launch's by the
        token in its batch script; a job of that name without it is another launch's."""
        log_path = log_path if Path(log_path).is_absolute() else str(Path(self.workdir) / log_path)
        name = f"{self.job_name_prefix}-{Path(log_path).stem}"[:64]
        jobs = self._slurm(["squeue", "-h", f"--name={name}", "-o", "%i"]).stdout.split()  # raises on failure
        if token not in _read(log_path + ".sbatch"):
            return []
        pid_text = _read(pid_path(log_path))
        pid = int(pid_text) if pid_text.strip().isdigit() and int(pid_text) else None
        return [
            ProcessHandle(
                executor=self.kind,
                host=host,
                log_path=log_path,
                command=command,
                job_id=j,
                pid=pid,
                pgid=pid,
                started_at=0.0,
            )
            for j in jobs
        ]

    def close(self) -> None:
        """Nothing to release: jobs are stopped explicitly (the run ledger reaps them)."""


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return ""
