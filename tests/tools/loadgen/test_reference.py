"""bench/reference_server.py: its records are the truth the loadgen benchmark compares to."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("reference_server", ROOT / "bench" / "reference_server.py")
reference_server = importlib.util.module_from_spec(SPEC)  # type: ignore[arg-type]
SPEC.loader.exec_module(reference_server)  # type: ignore[union-attr]


def test_kernel_arrival_is_when_the_bytes_arrived_not_when_they_were_read() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, reference_server.SO_TIMESTAMPNS, 1)  # as the server does
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    deadline = time.monotonic() + 5  # Linux turns stamping on lazily: wait until a segment is stamped
    while True:
        client.sendall(b"x")
        _, warm, _, _ = server.recvmsg(64, reference_server.ANCILLARY_SPACE)
        if reference_server.kernel_arrival(warm) is not None or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    sent = time.perf_counter()
    client.sendall(b"request")
    returned = time.perf_counter()  # the bytes arrived between these two (a loaded machine may pause here)
    time.sleep(0.05)
    data, ancillary, _, _ = server.recvmsg(64, reference_server.ANCILLARY_SPACE)
    read = time.perf_counter()
    arrived = reference_server.kernel_arrival(ancillary)
    for s in (client, server, listener):
        s.close()
    assert data == b"request" and arrived is not None
    assert sent - 0.002 <= arrived <= returned + 0.002 and read - arrived >= 0.03


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "reference_server.py"),
            "--port",
            "0",
            "--first-token-ms",
            "40",
            "--interval-ms",
            "5",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    assert line.startswith("LISTENING"), line
    yield f"http://127.0.0.1:{line.split()[1]}"
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


def test_streams_follow_the_schedule_and_records_bracket_the_first_token(url: str) -> None:
    with httpx.Client(trust_env=False) as client:
        client.post(url + "/reset")
        for path, key in (("/v1/completions", '"text"'), ("/v1/chat/completions", '"content"')):
            body = {
                "model": "reference-model",
                "max_tokens": 6,
                "stream": True,
                "prompt": "a b c",
                "messages": [{"role": "user", "content": "a b c"}],
            }
            sent = time.perf_counter()
            with client.stream("POST", url + path, json=body) as resp:
                text = "".join(resp.iter_text())
            elapsed = time.perf_counter() - sent
            assert resp.status_code == 200 and text.count(key) == 6 and text.endswith("data: [DONE]\n\n")
            assert (
                '"completion_tokens": 6' in text and 0.04 + 5 * 0.005 <= elapsed < 5
            )  # the schedule's floor; a loaded machine adds
        records = client.get(url + "/records").json()
        assert len(records["arrivals"]) == len(records["reads"]) == len(records["first_tokens"]) == 2
        for arrived, read, first in zip(records["arrivals"], records["reads"], records["first_tokens"]):
            assert arrived <= read < first
            assert 0.04 <= first - arrived < 0.06  # first token due 40 ms after the kernel got the request
        assert records["buffered_writes"] == 0
        client.post(url + "/reset")
        assert client.get(url + "/records").json()["arrivals"] == []
        assert client.get(url + "/server_info").json()["time_scale"] == 1.0
        assert client.get(url + "/nope").status_code == 404


def test_keep_alive_connection_serves_requests_one_after_another(url: str) -> None:
    body = json.dumps({"max_tokens": 2, "stream": True, "prompt": "x"}).encode()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with socket.create_connection((url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(request + request)  # pipelined: the second waits for the first
        data = b""
        sock.settimeout(5)
        while data.count(b"0\r\n\r\n") < 2:
            data += sock.recv(65536)
    assert data.count(b"HTTP/1.1 200 OK") == 2 and data.count(b"[DONE]") == 2
