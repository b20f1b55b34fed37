"""ServerLauncher against a real tiny HTTP server script started as a process group."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from campaign.domain.models import FailureClass
from tools.executors import procinfo
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchFailed, LaunchRequest, ServerLauncher
from tools.server.ledger import ProcessLedger

REPO = Path(__file__).resolve().parents[3]

FAKE_SERVER = r"""
import json, os, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, mode, model, delay = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
pidfile = os.environ.get("PIDFILE")
if pidfile:
    open(pidfile, "w").write(str(os.getpid()))
print(f"starting {mode} token={os.environ.get('HF_TOKEN', '')}", flush=True)
if mode == "crash":
    time.sleep(delay)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", file=sys.stderr, flush=True)
    sys.exit(1)
if mode == "badflag":
    print("usage: launch_server.py [-h] --model-path MODEL_PATH", file=sys.stderr)
    print("launch_server.py: error: unrecognized arguments: --bogus", file=sys.stderr, flush=True)
    sys.exit(2)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(f"CHILD {child.pid}", flush=True)
time.sleep(delay)
healthy = mode != "never"

want_key = os.environ.get("REQUIRE_KEY")  # like `--api-key`: /v1/* needs `Bearer <key>`

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization")
        print(f"AUTH {self.path} {auth or '-'}", flush=True)
        if want_key and self.path.startswith("/v1/") and auth != f"Bearer {want_key}":
            code, body = 401, {"error": "invalid API key"}
        elif self.path == "/health":
            code, body = (200, {}) if healthy else (503, {"error": "loading"})
        elif self.path == "/v1/models":
            code, body = 200, {"object": "list", "data": [{"id": model, "object": "model"}]}
        else:
            code, body = 404, {}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass

srv = ThreadingHTTPServer(("127.0.0.1", port), H)
print("serving", flush=True)
if mode == "dies":
    import threading
    def die():
        time.sleep(1.0)
        print("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", flush=True)
        os._exit(0)
    threading.Thread(target=die, daemon=True).start()
srv.serve_forever()
"""


@pytest.fixture
def executor() -> LocalExecutor:
    ex = LocalExecutor()
    yield ex
    ex.close()


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return path


def request(
    executor: LocalExecutor,
    script: Path,
    tmp_path: Path,
    mode: str,
    *,
    model: str = "tiny",
    delay: float = 0.5,
    expect: str | None = "tiny",
    timeout: float = 20.0,
    **kw,
) -> LaunchRequest:
    port = executor.free_port()
    return LaunchRequest(
        argv=[sys.executable, str(script), str(port), mode, model, str(delay)],
        log_path=str(tmp_path / f"{mode}.log"),
        port=port,
        expect_model=expect,
        startup_timeout_s=timeout,
        poll_interval_s=0.1,
        stop_grace_s=1.0,
        **kw,
    )


def group_gone(pgid: int | None) -> bool:
    assert pgid is not None
    return procinfo.live_members(pgid) == set()


def child_pid(log_path: str) -> int:
    text = Path(log_path).read_text()
    return next(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("CHILD "))


def test_launch_waits_for_health_and_stops_the_group(executor, script, tmp_path) -> None:
    req = request(executor, script, tmp_path, "ok", delay=1.0, env={"HF_TOKEN": "hf_secretvalue123456789"})
    with ServerLauncher(executor).launch(req) as server:
        assert server.url == f"http://127.0.0.1:{req.port}"
        assert httpx.get(server.url + "/health", trust_env=False).status_code == 200
        assert server.check() is None
        excerpt = server.log_excerpt(5)
        assert "serving" in excerpt
        assert not any("hf_secretvalue123456789" in ln for ln in excerpt)
        child = child_pid(req.log_path)
    assert group_gone(server.handle.pgid)
    assert not procinfo.is_running(child)
    assert server.stop() is not None  # idempotent, keeps the status


@pytest.mark.parametrize(
    ("mode", "expected", "code"),
    [
        ("crash", FailureClass.oom, 1),
        ("badflag", FailureClass.bad_flag, 2),
    ],
)
def test_early_exit_is_classified(executor, script, tmp_path, mode, expected, code) -> None:
    with pytest.raises(LaunchFailed) as info:
        ServerLauncher(executor).launch(request(executor, script, tmp_path, mode))
    failure = info.value.failure
    assert (failure.failure_class, failure.exit_code, failure.phase) == (expected, code, "start")
    assert failure.evidence


def test_health_timeout_stops_the_whole_group(executor, script, tmp_path) -> None:
    req = request(executor, script, tmp_path, "never", timeout=2.0)
    t0 = time.monotonic()
    with pytest.raises(LaunchFailed) as info:
        ServerLauncher(executor).launch(req)
    assert time.monotonic() - t0 < 10
    failure = info.value.failure
    assert failure.failure_class == FailureClass.health_timeout
    assert "HTTP 503" in failure.summary
    assert "serving" in failure.evidence
    assert not procinfo.is_running(child_pid(req.log_path))  # TERM-ignoring child killed too


def test_wrong_model_on_the_port_is_not_taken_for_ours(executor, script, tmp_path) -> None:
    req = request(executor, script, tmp_path, "ok", model="someone-elses-model", expect="tiny")
    with pytest.raises(LaunchFailed) as info:
        ServerLauncher(executor).launch(req)
    failure = info.value.failure
    assert failure.failure_class == FailureClass.port_in_use
    assert "someone-elses-model" in failure.summary
    assert not procinfo.is_running(child_pid(req.log_path))


class _Stranger(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        data = json.dumps({"data": [{"id": "tiny"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_port_already_served_fails_before_starting(executor, script, tmp_path) -> None:
    stranger = ThreadingHTTPServer(("127.0.0.1", 0), _Stranger)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    try:
        req = request(executor, script, tmp_path, "ok")
        req = req.model_copy(update={"port": stranger.server_address[1]})
        ledger = ProcessLedger(tmp_path / "ledger.jsonl")
        with pytest.raises(LaunchFailed) as info:
            ServerLauncher(executor, ledger=ledger).launch(req)
        assert info.value.failure.failure_class == FailureClass.port_in_use
        assert not Path(req.log_path).exists()  # nothing was started
        assert ledger.live() == []
    finally:
        stranger.shutdown()
        stranger.server_close()


def test_death_while_serving_is_classified_as_load_failure(executor, script, tmp_path) -> None:
    req = request(executor, script, tmp_path, "dies", delay=0.2)
    with ServerLauncher(executor).launch(req) as server:
        deadline = time.monotonic() + 10
        while (failure := server.check()) is None:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert failure.failure_class == FailureClass.engine_dead
        assert (failure.phase, failure.exit_code) == ("load", 0)
    assert server.check() is None  # stopped on purpose


def test_ledger_tracks_running_servers(executor, script, tmp_path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    with ServerLauncher(executor, ledger=ledger).launch(request(executor, script, tmp_path, "ok")) as server:
        assert [h.pid for h in ledger.live()] == [server.handle.pid]
    assert ledger.live() == []


CONTROLLER = """
import os, sys
sys.path.insert(0, {repo!r})
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchRequest, ServerLauncher
from tools.server.ledger import ProcessLedger
ex = LocalExecutor()
req = LaunchRequest.model_validate_json({req!r})
launcher = ServerLauncher(ex, ledger=ProcessLedger({ledger!r}))
server = launcher.launch(req)
print("UP", flush=True)
if {die!r}:
    os.kill(os.getpid(), 9)
"""


def _controller(tmp_path: Path, req: LaunchRequest, die: bool) -> subprocess.Popen[str]:
    code = CONTROLLER.format(repo=str(REPO), req=req.model_dump_json(), ledger=str(tmp_path / "ledger.jsonl"), die=die)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_file(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text()


def test_ctrl_c_during_launch_leaves_no_process(executor, script, tmp_path) -> None:
    pidfile = tmp_path / "server.pid"
    req = request(executor, script, tmp_path, "never", timeout=60.0, env={"PIDFILE": str(pidfile)})
    controller = _controller(tmp_path, req, die=False)
    server_pid = int(_wait_file(pidfile))
    time.sleep(0.5)  # the child is spawned, the launcher is polling health
    controller.send_signal(signal.SIGINT)
    _out, err = controller.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    assert group_gone(server_pid)
    assert ProcessLedger(tmp_path / "ledger.jsonl").live() == []


def test_ledger_reaps_servers_of_a_killed_controller(executor, script, tmp_path) -> None:
    req = request(executor, script, tmp_path, "ok")
    controller = _controller(tmp_path, req, die=True)
    out, _err = controller.communicate(timeout=30)
    assert "UP" in out and controller.returncode == -9
    ledger = ProcessLedger(tmp_path / "ledger.jsonl")
    [leftover] = ledger.live()
    assert procinfo.live_members(leftover.pgid)  # the server outlived its controller
    assert httpx.get(f"http://127.0.0.1:{req.port}/health", trust_env=False).status_code == 200

    reaped = ledger.reap(lambda handle: LocalExecutor(), grace_s=1.0)
    assert [h.pid for h in reaped] == [leftover.pid]
    assert group_gone(leftover.pgid)
    assert ledger.live() == []


def _auth_seen(log_path: str, path: str) -> list[str]:
    """The Authorization header (or '-') of every GET `path` the fake server answered."""
    return [ln.split(" ", 2)[2] for ln in Path(log_path).read_text().splitlines() if ln.startswith(f"AUTH {path} ")]


def test_the_readiness_probe_sends_the_servers_own_key(executor, script, tmp_path) -> None:
    """A server started with an API key answers /v1/models with 401 without it: the launch
    that holds the key (`server.api_key_env`) sends it and is taken for up."""
    req = request(executor, script, tmp_path, "ok", env={"REQUIRE_KEY": "srv-key-123"})
    with ServerLauncher(executor, api_key="srv-key-123").launch(req):
        assert _auth_seen(req.log_path, "/v1/models") == ["Bearer srv-key-123"]
        assert _auth_seen(req.log_path, "/health") and set(_auth_seen(req.log_path, "/health")) == {"-"}


def test_without_the_key_a_keyed_server_is_refused_with_the_fix(executor, script, tmp_path, monkeypatch) -> None:
    """No `server.api_key_env`: no key is sent (the controller's OPENAI_API_KEY neither),
    and a server that wants one fails the launch naming the field, not 'another server'."""
    monkeypatch.setenv("OPENAI_API_KEY", "srv-key-123")
    req = request(executor, script, tmp_path, "ok", env={"REQUIRE_KEY": "srv-key-123"})
    with pytest.raises(LaunchFailed) as info:
        ServerLauncher(executor).launch(req)
    failure = info.value.failure
    assert failure.failure_class == FailureClass.environment, failure
    assert "HTTP 401" in failure.summary and "server.api_key_env" in failure.summary
    assert set(_auth_seen(req.log_path, "/v1/models")) == {"-"}
    (tmp_path / "plain").mkdir()
    plain = request(executor, script, tmp_path / "plain", "ok")  # a server without a key: nothing is sent either
    with ServerLauncher(executor).launch(plain):
        seen = _auth_seen(plain.log_path, "/v1/models") + _auth_seen(plain.log_path, "/health")
        assert seen and set(seen) == {"-"}
