"""`campaign serve` as a real subprocess on a free port, for the web view's tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_LISTENING = re.compile(r"http://(\S+?):(\d+)/")


@contextmanager
def serving(db: Path | str, *, host: str = "127.0.0.1", token: str | None = None) -> Iterator[str]:
    """Yields the base URL (on 127.0.0.1 whatever the bound address); stops the server after."""
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_SERVE_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    if token is not None:
        env["CAMPAIGN_SERVE_TOKEN"] = token
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli.entry", "serve", "--db", str(db), "--host", host, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = _LISTENING.search(first)
        assert m, f"campaign serve did not start: {first!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        base = f"http://127.0.0.1:{m.group(2)}"
        _wait_listening(base)
        yield base
    finally:
        stop(proc, 10)


def stop(proc: subprocess.Popen[str], timeout_s: float) -> None:
    """Ctrl-C, as a person stops it; a kill when it does not end within `timeout_s`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_listening(base: str, timeout_s: float = 20.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{base}/static/favicon.svg", timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
