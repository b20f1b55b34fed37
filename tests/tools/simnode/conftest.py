"""Launch the simulated node as a real subprocess (own process group) on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    proc: subprocess.Popen
    url: str
    log_path: Path
    started: float

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_healthy(self, timeout: float = 20.0) -> bool:
        """True once /health is 200; False if the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise TimeoutError(f"node not healthy after {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def launch(tmp_path):
    nodes: list[Node] = []

    def _launch(*args: str, env: dict | None = None, time_scale: float = 200.0, cuda: str = "12.8") -> Node:
        port = free_port()
        log_path = tmp_path / f"node-{port}.log"
        argv = [
            sys.executable,
            "-m",
            "tools.simnode",
            "--port",
            str(port),
            "--time-scale",
            str(time_scale),
            "--cuda",
            cuda,
            "--seed",
            "7",
            *args,
        ]
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        with open(log_path, "w") as out:
            proc = subprocess.Popen(
                argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
            )
        node = Node(proc, f"http://127.0.0.1:{port}", log_path, time.monotonic())
        nodes.append(node)
        return node

    yield _launch
    for n in nodes:
        n.stop()
