"""Launch an inference server through an executor and wait until it serves.

A launch either returns a `RunningServer` that answers health (and lists the expected
model, so a stranger's server on the same port is never taken for ours) or raises
`LaunchFailed` with a classified failure.  On every failure path, Ctrl-C included,
the process group is stopped before the exception leaves.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterable
from types import TracebackType

import httpx
from pydantic import BaseModel, Field

from campaign.domain import killpoint
from campaign.domain.models import Failure, FailureClass, ProcessHandle
from campaign.domain.redact import redact_argv, redact_text
from tools.executors.base import LAUNCH_TOKEN_ENV, Executor
from tools.server.ledger import ProcessLedger
from tools.server.triage import Phase, TriageRule, classify

TRIAGE_LINES = 300  # log lines given to triage
TIMEOUT_EVIDENCE_LINES = 30


class LaunchRequest(BaseModel):
    """Everything needed to start one server and decide that it is up."""

    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    log_path: str
    port: int = Field(ge=1, le=65535)
    host: str | None = None  # None: the executor's host
    health_path: str = "/health"
    startup_timeout_s: float = Field(default=900.0, gt=0)
    expect_model: str | None = None  # must appear in /v1/models
    poll_interval_s: float = Field(default=1.0, gt=0)
    cwd: str | None = None
    stop_grace_s: float = Field(default=10.0, ge=0)
    #: node variables the server inherits besides `env` (names or PREFIX*); None: the
    #: executor's default (campaign.domain.server_env.DEFAULT_BASE_ENV).
    base_env: list[str] | None = None


class LaunchFailed(Exception):
    """The server did not come up; `failure` says why, with log evidence."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(f"{failure.failure_class.value}: {failure.summary}")


class RunningServer:
    """A server that answered health.  Stops its process group on exit."""

    def __init__(
        self,
        executor: Executor,
        handle: ProcessHandle,
        request: LaunchRequest,
        url: str,
        ledger: ProcessLedger | None,
        extra_rules: tuple[TriageRule, ...],
    ) -> None:
        self.executor = executor
        self.handle = handle
        self.request = request
        self.url = url
        self._ledger = ledger
        self._extra_rules = extra_rules
        self._stopped = False
        self._status: int | None = None

    def check(self) -> Failure | None:
        """None while the process runs (or after `stop`); a classified failure (phase
        "load") once it died by itself."""
        if self._stopped:
            return None  # stopped on purpose: not a failure
        status = self.executor.poll(self.handle)
        if status is None:
            return None
        failure = classify(status, self.log_excerpt(TRIAGE_LINES), phase="load", extra_rules=self._extra_rules)
        failure.log_path = self.request.log_path
        return failure

    def log_excerpt(self, lines: int = 50) -> list[str]:
        """The last log lines, secrets masked: safe to store as an artifact."""
        return [redact_text(ln, self.request.env) for ln in self.executor.tail(self.handle, lines)]

    def stop(self) -> int | None:
        """Stop the process group (idempotent); returns its exit status."""
        if not self._stopped:
            self._status = self.executor.stop(self.handle, grace_s=self.request.stop_grace_s)
            self._stopped = True
            if self._ledger is not None:
                self._ledger.remove(self.handle)
        return self._status

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(
        self, _exc_type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.stop()


class ServerLauncher:
    """Starts servers through one executor, optionally recording them in a ledger."""

    def __init__(
        self,
        executor: Executor,
        *,
        ledger: ProcessLedger | None = None,
        extra_rules: Iterable[TriageRule] = (),
        api_key: str | None = None,
    ) -> None:
        self.executor = executor
        self.ledger = ledger
        self.extra_rules = tuple(extra_rules)
        # the server's own key (`server.api_key_env`): a server started with `--api-key`
        # answers /v1/models with 401 without it; kept off LaunchRequest, which is logged
        self._api_key = api_key

    def launch(self, req: LaunchRequest) -> RunningServer:
        host = req.host or self.executor.host
        url = f"http://{_url_host(host)}:{req.port}"
        if _port_answers(host, req.port):
            raise LaunchFailed(
                Failure(
                    failure_class=FailureClass.port_in_use,
                    phase="start",
                    summary=f"{host}:{req.port} already accepts connections before the launch",
                    evidence=[f"connect({host}, {req.port}) succeeded before the server was started"],
                )
            )

        # the ledger first: the intent (with a token the server carries in its environment)
        # before the spawn, the pid right after, so a kill in between leaves a findable server
        token = uuid.uuid4().hex
        env = {**req.env, LAUNCH_TOKEN_ENV: token}
        base = {"base_env": req.base_env} if req.base_env is not None else {}
        if self.ledger is not None:
            self.ledger.intend(
                token,
                executor=self.executor.kind,
                host=host,
                log_path=req.log_path,
                command=redact_argv(req.argv, req.env),
            )
        try:
            handle = self.executor.start(req.argv, log_path=req.log_path, env=env, cwd=req.cwd, **base)
        except Exception:
            if self.ledger is not None:
                self.ledger.forget(token)  # no server came of it (an interrupt keeps the intent)
            raise
        killpoint.reached("launch:spawned")
        if req.host is None and handle.host and handle.host != host:  # e.g. the node Slurm picked
            url = f"http://{_url_host(handle.host)}:{req.port}"
        server = RunningServer(self.executor, handle, req, url, self.ledger, self.extra_rules)
        up = False
        try:
            if self.ledger is not None:
                self.ledger.record(handle, token=token)
            self._wait_until_serving(server)
            up = True
            return server
        except LaunchFailed as exc:  # every failure of a started server names its log
            exc.failure.log_path = req.log_path
            raise
        finally:
            if not up:
                _stop_despite_interrupts(server)

    def _wait_until_serving(self, server: RunningServer) -> None:
        req = server.request
        deadline = time.monotonic() + req.startup_timeout_s
        last = "no answer yet"
        with httpx.Client(timeout=min(10.0, max(1.0, req.poll_interval_s * 5)), trust_env=False) as client:
            while True:
                self._raise_if_exited(server, "start")
                status = _get_status(client, server.url + req.health_path)
                if status == 200:
                    self._check_model(server, client)
                    self._raise_if_exited(server, "start")
                    return
                last = f"HTTP {status}" if status is not None else "connection refused or timed out"
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(req.poll_interval_s, remaining))
        raise LaunchFailed(
            Failure(
                failure_class=FailureClass.health_timeout,
                phase="start",
                summary=f"no HTTP 200 from {server.url}{req.health_path} within {req.startup_timeout_s:g}s (last: {last})",
                evidence=server.log_excerpt(TIMEOUT_EVIDENCE_LINES),
            )
        )

    def _raise_if_exited(self, server: RunningServer, phase: Phase) -> None:
        status = self.executor.poll(server.handle)
        if status is not None:
            raise LaunchFailed(
                classify(status, server.log_excerpt(TRIAGE_LINES), phase=phase, extra_rules=self.extra_rules)
            )

    def _check_model(self, server: RunningServer, client: httpx.Client) -> None:
        expected = server.request.expect_model
        if expected is None:
            return
        status, served = _served_models(client, server.url + "/v1/models", self._api_key)
        if expected in served:
            return
        self._raise_if_exited(server, "start")  # ours died: its log says why
        if status in (401, 403):  # ours or not, it wants a key this launch does not hold
            raise LaunchFailed(
                Failure(
                    failure_class=FailureClass.environment,
                    phase="start",
                    summary=f"{server.url}/v1/models answers HTTP {status}: the server requires an API key "
                    + (
                        "and refused the one of server.api_key_env"
                        if self._api_key
                        else "(fix: set server.api_key_env to the variable that holds it)"
                    ),
                    evidence=[f"GET {server.url}/v1/models -> HTTP {status}", *server.log_excerpt(10)],
                )
            )
        raise LaunchFailed(
            Failure(
                failure_class=FailureClass.port_in_use,
                phase="start",
                summary=f"{server.url} answers but does not serve {expected!r} (serves {served or 'nothing'}): "
                "another server holds the port",
                evidence=[f"GET {server.url}/v1/models -> {served}", *server.log_excerpt(10)],
            )
        )


def _stop_despite_interrupts(server: RunningServer) -> None:
    """Stop the group even if Ctrl-C is pressed again while stopping; the first
    interrupt still propagates from the caller's `finally`."""
    interrupted = False
    for _ in range(3):
        try:
            server.stop()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _get_status(client: httpx.Client, url: str) -> int | None:
    try:
        return client.get(url).status_code
    except httpx.HTTPError:
        return None


def _served_models(client: httpx.Client, url: str, api_key: str | None) -> tuple[int | None, list[str]]:
    """The answer's status and the model ids it lists (the server's own key sent when given)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = client.get(url, headers=headers)
        body = resp.json()
    except httpx.HTTPError:
        return None, []
    except ValueError:
        return resp.status_code, []
    data = body.get("data", []) if isinstance(body, dict) else []
    return resp.status_code, [str(m.get("id")) for m in data if isinstance(m, dict) and "id" in m]
