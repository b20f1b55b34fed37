"""One GPU node as the campaign sees it: fingerprint it, launch a config, measure it.

Glues an executor, the server launcher, the load generator and the correctness
probe into the one operation the campaign repeats: *launch this config, run these
workloads, stop it, tell me what happened*.  The server is stopped on every exit
path, and every started process is written to the run ledger first, so a killed
controller leaves nothing behind after the next start.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from campaign.domain.errors import UserError
from campaign.domain.measurement import Measurement
from campaign.domain.models import (
    EffectiveConfig,
    Failure,
    FailureClass,
    Fingerprint,
    ReportedConfig,
    SweepResult,
    WorkloadSpec,
)
from campaign.domain.redact import redact_argv, redact_text
from campaign.domain.work import MEASUREMENT_PROTOCOL
from tools.engines.base import EngineMetrics, EngineProfile
from tools.engines.launch_spec import ServerLaunch, build_launch
from tools.engines.simulated import PROFILE as SIMULATED
from tools.engines.version_probe import parse_version, version_argv
from tools.executors.base import Executor, NodeError
from tools.server.launch import LaunchFailed, RunningServer, ServerLauncher
from tools.server.ledger import ProcessLedger

ProgressFn = Callable[[str, dict[str, Any]], None]
#: how much of a server's log is read for its start-up config (vLLM logs ~100 lines before
#: it serves; a tail this long holds them on any healthy start)
STARTUP_LOG_LINES = 5000
#: where `campaign bench` on the node finds the server's key (an env name, never the value)
BENCH_KEY_ENV = "CAMPAIGN_SERVER_API_KEY"


def launch_seed(base: object, label: str) -> int:
    """A simulated launch's `{launch_seed}`: from the node's seed and the launch's name
    (hypothesis, side, round), so a seeded campaign replays its launch offsets; -1 (a
    fresh draw) without a base."""
    if base is None:
        return -1
    return zlib.crc32(f"{base}/{label}".encode()) & 0x7FFFFFFF


class NodeRuntime:
    """A node: its executor plus how to start the engine on it."""

    def __init__(
        self,
        name: str,
        executor: Executor,
        *,
        model: str,
        fmt: dict[str, object],
        workdir: str,
        profile: EngineProfile = SIMULATED,
        command: str | None = None,
        python: str | None = None,
        health: str | None = None,
        startup_timeout_s: float | None = None,
        fingerprint_argv: list[str] | None = None,
        ledger: ProcessLedger | None = None,
        progress: ProgressFn | None = None,
        sweep_on: str = "controller",
        base_env: list[str] | None = None,
        api_key: str | None = None,
    ) -> None:
        # the engine profile is the one source of the launch command, env defaults, health path,
        # start-up time, triage rules and metrics reader; the playbook's `server:` may override
        # them (command, python, health, startup_timeout_s, base_env): tools.engines.launch_spec
        self.profile = profile
        self.extra_rules = tuple(profile.triage_rules)
        self.base_env = base_env  # the playbook's `server.base_env` (None: the profile's list)
        self.sweep_on = sweep_on  # "node": the load generator runs on the node, next to the server
        self._api_key = api_key  # the server's own key (server.api_key_env): sent to it, nowhere else
        self.name = name
        self.executor = executor
        self.command = command
        self.python = python
        self.model = model
        self.health = health
        self.startup_timeout_s = startup_timeout_s
        self.fmt = dict(fmt)
        self.workdir = workdir
        self.fingerprint_argv = fingerprint_argv
        self.ledger = ledger
        self.progress = progress or (lambda kind, data: None)

    def launch_spec(
        self,
        config: EffectiveConfig,
        *,
        port: int | str,
        label: str,
        source: str | None = None,
        expand_secrets: bool = True,
        seed: int | str | None = None,
    ) -> ServerLaunch:
        """The server `measure` starts for `config` (and `campaign plan` prints, with
        placeholders for the port, the worktree and a seeded launch's seed)."""
        fill = self._fmt(launch_seed(self.fmt.get("launch_seed_base"), label) if seed is None else seed, source)
        return build_launch(
            self.profile,
            config,
            model=self.model,
            port=port,
            fill=fill,
            command=self.command,
            python=self.python,
            health=self.health,
            startup_timeout_s=self.startup_timeout_s,
            base_env=self.base_env,
            expand_secrets=expand_secrets,
        )

    # ------------------------------------------------------------ environment
    def fingerprint(self) -> Fingerprint:
        """Read the environment on the node (nvidia-smi + version probes on real nodes)."""
        if self.fingerprint_argv:
            res = self.executor.run(self.fingerprint_argv, timeout=120)
            text = res.stdout.strip()
            try:
                return Fingerprint.model_validate(json.loads(text[text.index("{") :]))
            except ValueError:
                raise NodeError(
                    f"node {self.name}: the fingerprint command failed (exit {res.returncode}): "
                    f"{redact_text((res.stderr or res.stdout).strip()[-300:])}"
                ) from None
        fp = probe_fingerprint(self.executor)
        fp.engine = self.profile.name
        fp.engine_version = self._engine_version()
        return fp

    def _engine_version(self) -> str:
        """The engine's installed version, read with the interpreter the launch command
        runs ("" when it cannot be read: the fingerprint then says "unknown")."""
        try:  # no launch: no port, no seed, no worktree (the installed engine is the one asked about)
            argv = version_argv(
                self.launch_spec(EffectiveConfig(), port=0, label="", source="", expand_secrets=False).argv,
                self.profile.package,
            )
        except UserError:  # a placeholder only a launch fills: the launch names the fault
            return ""
        if argv is None:
            return ""
        res = self.executor.run(argv, timeout=120)
        return parse_version(res.stdout) if res.returncode == 0 else ""

    def seeded_launches(self) -> bool:
        """Whether each launch's `{launch_seed}` follows from its name (a seeded simulated node)."""
        return self.fmt.get("launch_seed_base") is not None

    def _fmt(self, seed: int | str, source: str | None) -> dict[str, object]:
        """The node's placeholders for one launch (or a probe of it)."""
        fmt = {**self.fmt, "python": self.fmt.get("python", sys.executable), "launch_seed": seed}
        if source is not None:
            fmt["source"] = source
        return fmt

    # ------------------------------------------------------------ measurement
    def measure(
        self,
        config: EffectiveConfig,
        workloads: list[WorkloadSpec],
        *,
        label: str,
        correctness_prompts: list[str] | None = None,
        correctness_tokens: int = 16,
        source: str | None = None,
    ) -> Measurement:
        """Launch `config` from the tree at `source` (the `{source}` of the command
        template, a worktree on the node), run the workloads, stop."""
        from tools.loadgen.correctness import greedy_outputs
        from tools.loadgen.sweep import run_sweep

        port = self.executor.free_port()
        spec = self.launch_spec(config, port=port, label=label, source=source)
        log_path = str(Path(self.workdir) / "logs" / f"{label}-{int(time.time() * 1000)}.log")
        req = spec.request(port=port, log_path=log_path)  # host: the executor's, then the handle's
        out = Measurement(command=redact_argv(spec.argv))
        t0 = time.monotonic()
        self.progress("launch", {"label": label, "node": self.name, "command": out.command})
        launcher = ServerLauncher(
            self.executor, ledger=self.ledger, extra_rules=self.extra_rules, api_key=self._api_key
        )
        try:
            server = launcher.launch(req)
        except LaunchFailed as exc:
            out.failure = exc.failure
            out.wall_seconds = time.monotonic() - t0
            self.progress(
                "launch_failed",
                {
                    "label": label,
                    "class": exc.failure.failure_class.value,
                    "summary": exc.failure.summary,
                    "lines": exc.failure.evidence,
                    "log_path": exc.failure.log_path,
                },
            )
            return out
        out.queue_seconds = self.executor.queue_wait_s(server.handle) or 0.0
        with server:
            info = self._metrics(server.url)
            out.time_scale = float((info.server_args.get("time_scale") if info else None) or 1.0)
            out.reported = self._reported(server, info)
            self.progress("ready", {"label": label, "url": server.url})
            timeout = request_timeout_s(out.time_scale)
            try:
                if correctness_prompts:
                    out.outputs = asyncio.run(
                        greedy_outputs(
                            server.url,
                            correctness_prompts,
                            correctness_tokens,
                            model=self.model,
                            timeout_s=timeout,
                            api_key=self._api_key,
                        )
                    )
                before = info
                for wl in workloads:
                    self.progress("sweep", {"label": label, "workload": wl.name})
                    if self.sweep_on == "node":
                        res = self._sweep_on_node(port, wl, out.time_scale, timeout, label)
                    else:
                        res = asyncio.run(
                            run_sweep(
                                server.url,
                                wl,
                                model=self.model,
                                time_scale=out.time_scale,
                                progress=lambda ev: self.progress("level", {"event": ev}),
                                request_timeout_s=timeout,
                                api_key=self._api_key,
                            )
                        )
                    out.sweeps[wl.name] = res
                    after = self._metrics(server.url)
                    acc = self.profile.accept_length_between(before, after)
                    if acc is not None:
                        out.stats[wl.name] = {"spec_accept_length": acc}
                    before = after
                    out.failure = server.check() or _load_failure(res)
                    if out.failure is not None:
                        break
            except UserError:  # not the server's doing: one line, exit 2 (the server stops on the way out)
                raise
            except Exception as exc:  # the server broke the connection: find out why
                time.sleep(0.5)
                text = redact_text(str(exc))[:500]
                cls = FailureClass.hang if "timeout" in text.lower() else FailureClass.server_error
                out.failure = server.check() or Failure(
                    failure_class=cls,
                    phase="load",
                    evidence=[text],
                    summary=f"requests failed while serving: {exc.__class__.__name__}",
                )
            health_url = server.url + spec.health_path
            if out.failure is not None and server.check() is None and not _answers(health_url):
                out.failure = _outage(health_url, out.failure)
            out.log_excerpt = [redact_text(x) for x in server.log_excerpt(40)]
        out.wall_seconds = time.monotonic() - t0
        # a job waiting in the Slurm queue holds no node: the budget counts it apart
        out.node_seconds = max(0.0, out.wall_seconds - out.queue_seconds) * out.time_scale
        return out

    def _reported(self, server: RunningServer, info: EngineMetrics | None) -> ReportedConfig | None:
        """What the server says it runs: its metrics endpoint, else (vLLM) its start-up log.
        A log that cannot be read is no report, never a failed measurement."""
        lines: list[str] | None = None
        if self.profile.reports_in_log:
            try:
                lines = server.log_excerpt(STARTUP_LOG_LINES)
            except Exception:  # a node that lost the log file: no report
                lines = None
        try:
            return self.profile.reported_config(info, lines)
        except ValueError:  # a report in an unknown shape: no claim either way
            return None

    def _metrics(self, url: str) -> EngineMetrics | None:
        """The engine's live counters through its profile; None when it does not answer."""
        try:
            return self.profile.read_metrics(url, timeout_s=5.0)
        except Exception:  # a server that has no metrics endpoint, or garbage there: no figures
            return None

    def _sweep_on_node(self, port: int, wl: WorkloadSpec, time_scale: float, timeout: float, label: str) -> SweepResult:
        """Run the load sweep on the node itself (closer to the server: latency figures
        without the network between controller and node), then fetch its JSON."""
        import tempfile

        remote_dir = f"{self.workdir}/sweeps"
        self.executor.run(["mkdir", "-p", remote_dir], timeout=60)
        prompts = wl.prompts
        if prompts not in ("fixed", "diverse"):  # a JSONL file: ship it
            prompts = f"{remote_dir}/{Path(wl.prompts).name}"
            self.executor.put(wl.prompts, prompts)
        # a name of its own per sweep: a resumed launch reuses its label, and a file from an
        # earlier sweep must not pass for this one's (no extra remote command to delete it)
        remote = f"{remote_dir}/{label}-{wl.name}-{uuid.uuid4().hex[:8]}.json"
        python = str(self.python or self.fmt.get("python") or "python3")
        n_requests = len(wl.concurrency) * 2 * max(wl.concurrency)
        argv = _bench_argv(python, port, wl, self.model, time_scale, timeout, prompts, remote)
        key_env = {BENCH_KEY_ENV: self._api_key} if self._api_key else {}  # over the executor's env, not argv
        res = self.executor.run(
            argv + (["--api-key-env", BENCH_KEY_ENV] if key_env else []),
            env=key_env,
            timeout=timeout * max(4, n_requests),
        )
        failed = RuntimeError(
            f"load sweep on node {self.name} failed (exit {res.returncode}): "
            f"{redact_text((res.stderr or res.stdout).strip()[-300:])}"
        )
        if res.returncode not in (0, 2):
            raise failed
        # exit 2: bad arguments (no JSON written) or requests that failed (JSON written
        # first): the sweep with its errors is the launch's result, which triage reads
        with tempfile.TemporaryDirectory() as tmp:
            local = str(Path(tmp) / "sweep.json")
            try:
                self.executor.get(remote, local)
                result = SweepResult.model_validate_json(Path(local).read_text())
            except Exception:
                if res.returncode != 0:
                    raise failed from None
                raise
        if result.protocol != MEASUREMENT_PROTOCOL:
            # an older `campaign` on the node hands the prompts out otherwise: its figures
            # are other work than this controller compares (`campaign.domain.work`)
            raise UserError(
                f"node {self.name}: its campaign's load generator hands out prompts by protocol "
                f"{result.protocol}, this controller's by {MEASUREMENT_PROTOCOL}: its sweeps are not "
                f"comparable with this campaign's (fix: install this campaign version on the node for "
                f"{python}, then campaign resume)"
            )
        result.workload = wl
        return result


#: a request that takes longer than this (node time) is taken for a hang; a time-scaled
#: node gets the same allowance in node time, so a hang is caught in seconds, not minutes.
REQUEST_TIMEOUT_NODE_S = 600.0
MIN_REQUEST_TIMEOUT_S = 5.0


def request_timeout_s(time_scale: float) -> float:
    return max(MIN_REQUEST_TIMEOUT_S, REQUEST_TIMEOUT_NODE_S / max(time_scale, 1e-9))


def _answers(url: str) -> bool:
    """Whether anything answers HTTP at `url` (any status): False on a transport error."""
    import httpx

    try:
        httpx.get(url, timeout=5, trust_env=False)
        return True
    except httpx.HTTPError:
        return False


def _outage(health_url: str, seen: Failure) -> Failure:
    """Requests failed and the server's process lives but its health endpoint cannot be
    reached: the node (or the network to it) is out, not the idea under test."""
    return Failure(
        failure_class=FailureClass.unreachable,
        phase="load",
        summary=f"{health_url} cannot be reached while the server process runs (requests failed: {seen.summary})",
        evidence=seen.evidence[:5],
    )


def _bench_argv(
    python: str, port: int, wl: WorkloadSpec, model: str, time_scale: float, timeout: float, prompts: str, out: str
) -> list[str]:
    """`campaign bench` on the node with exactly the workload's parameters."""
    return [
        python,
        "-m",
        "campaign.cli.main",
        "bench",
        f"http://127.0.0.1:{port}",
        "--concurrency",
        ",".join(str(c) for c in wl.concurrency),
        "--requests-per-level",
        str(wl.requests_per_level),
        "--output-tokens",
        str(wl.output_tokens),
        "--prompts",
        prompts,
        "--prompt-tokens",
        str(wl.prompt_tokens),
        "--warmup",
        str(wl.warmup_requests),
        "--seed",
        str(wl.seed),
        "--endpoint",
        wl.endpoint,
        "--model",
        model,
        "--time-scale",
        repr(time_scale),
        "--timeout",
        str(max(1, math.ceil(timeout))),
        "--json",
        out,
    ]


def _load_failure(res: SweepResult) -> Failure | None:
    """Most requests failing while the process lives: a hang (timeouts) or HTTP errors."""
    errors = sum(lv.errors for lv in res.levels)
    if not errors or errors < max(1, sum(lv.requests for lv in res.levels) // 2):
        return None
    samples = [s for lv in res.levels for s in lv.error_samples][:5]
    cls = FailureClass.hang if any("timeout" in s.lower() for s in samples) else FailureClass.server_error
    return Failure(
        failure_class=cls, phase="load", evidence=samples, summary=f"{errors} of the requests failed while serving"
    )


#: `cuda` of a node without a GPU: a CUDA toolkit installed there runs nothing.
NO_CUDA = "none"


def probe_fingerprint(executor: Executor) -> Fingerprint:
    """A real node's environment: nvidia-smi, nvcc and the engine's version, where present.
    A node where nvidia-smi lists no GPU says `cuda none`, whatever nvcc it has: the CPU
    build of an engine does not use it, and a revisit condition on CUDA must not fire
    when someone installs a toolkit on a CPU box."""
    fp = Fingerprint()
    res = executor.run(
        ["sh", "-c", "nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null"],
        timeout=30,
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    if res.returncode == 0 and lines:
        name, driver, cap = (x.strip() for x in (lines[0].split(",") + ["", "", ""])[:3])
        fp.gpu, fp.driver, fp.gpu_count = name, driver, len(lines)
        fp.arch = "sm_" + cap.replace(".", "") if cap else ""
    else:
        cpu = executor.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; nproc"], timeout=30)
        parts = [p.strip() for p in cpu.stdout.splitlines() if p.strip()]
        fp.gpu = "cpu: " + (parts[0] if parts else "unknown")
        fp.gpu_count = 0
        fp.arch = "cpu"
    if fp.gpu_count:
        nvcc = executor.run(["sh", "-c", "nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'"], timeout=30)
        fp.cuda = nvcc.stdout.replace("release", "").strip() if nvcc.returncode == 0 else ""
    else:
        fp.cuda = NO_CUDA
    host = executor.run(["hostname"], timeout=30)
    fp.host = host.stdout.strip()
    return fp
