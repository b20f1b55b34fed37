"""A hostile OpenAI-compatible endpoint on 127.0.0.1: raw HTTP, any answer shape.

`tests/fake_openai.py` answers well-formed completions; this one writes whatever
bytes a shape asks for (HTML, truncated bodies, slow drips, silence, broken
chunking), so the planner's reading of an untrusted endpoint is tested for real.
Each `Shape` is a function of the handler; the server plays `script` in order and
then repeats the last shape forever (a persistent fault).

    with HostileServer([html_page()]) as srv:
        LlmPlanner(spec, knobs, base_url=srv.url).propose(ctx)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Shape = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.server.owner.received.append(body)
        self.server.owner.next_shape()(self)

    def raw(
        self,
        status: int,
        body: bytes,
        *,
        ctype: str = "application/json",
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            pass
        if length is not None and length != len(body):
            self.close_connection = True

    def stop_event(self) -> threading.Event:
        return self.server.owner.stopping


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: HostileServer


class HostileServer:
    def __init__(self, script: list[Shape]) -> None:
        assert script
        self.script = list(script)
        self.received: list[Any] = []
        self.stopping = threading.Event()
        self._i = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def next_shape(self) -> Shape:
        with self._lock:
            shape = self.script[min(self._i, len(self.script) - 1)]
            self._i += 1
            return shape

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


# ------------------------------------------------------------------ shapes
def completion_body(content: Any, **over: Any) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    body.update(over)
    return body


def json_body(obj: Any, status: int = 200, **kw: Any) -> Shape:
    data = json.dumps(obj).encode()
    return lambda h: h.raw(status, data, **kw)


def raw_body(data: bytes, status: int = 200, **kw: Any) -> Shape:
    return lambda h: h.raw(status, data, **kw)


def content(text: str) -> Shape:
    """A well-formed completion whose message text is `text`."""
    return json_body(completion_body(text))


def answer(obj: Any) -> Shape:
    return content(json.dumps(obj))


def proposal(name: str = "try-it", **fields: Any) -> Shape:
    obj = {
        "name": name,
        "rationale": "because",
        "expected_effect": "+3%",
        "flags": [],
        "env": [],
        "unset_flags": [],
        "patch": None,
        "revisit_of": None,
    }
    for key in ("flags", "env"):
        if isinstance(fields.get(key), dict):
            fields[key] = [{"name": k, "value": v} for k, v in fields[key].items()]
    obj.update(fields)
    return answer(obj)


def error_status(code: int, headers: dict[str, str] | None = None) -> Shape:
    return json_body({"error": {"message": f"hostile {code}", "type": "x"}}, status=code, headers=headers)


def truncated(full: bytes, keep: int) -> Shape:
    """Headers promise `len(full)` bytes; the connection closes after `keep`."""
    return lambda h: h.raw(200, full[:keep], length=len(full))


def slow_drip(data: bytes, every_s: float) -> Shape:
    """The body one byte at a time, `every_s` apart (each read arrives well within a read timeout)."""

    def shape(h: _Handler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        for b in data:
            if h.stop_event().wait(every_s):
                return
            try:
                h.wfile.write(bytes([b]))
                h.wfile.flush()
            except OSError:
                return

    return shape


def silence(seconds: float) -> Shape:
    """Read the request, answer nothing for `seconds`, then close."""

    def shape(h: _Handler) -> None:
        h.stop_event().wait(seconds)
        h.close_connection = True

    return shape


def headers_then_silence(seconds: float) -> Shape:
    def shape(h: _Handler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", "5000")
        h.end_headers()
        h.wfile.write(b'{"id": "x", "choices": [')
        h.wfile.flush()
        h.stop_event().wait(seconds)
        h.close_connection = True

    return shape


def reset() -> Shape:
    """Close the socket without a response (RST where the OS allows)."""

    def shape(h: _Handler) -> None:
        try:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        h.close_connection = True

    return shape


def broken_chunks() -> Shape:
    """Chunked transfer encoding with a malformed chunk size."""

    def shape(h: _Handler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        h.wfile.write(b'5\r\n{"id"\r\nZZZ\r\nnot a chunk\r\n')
        h.wfile.flush()
        h.close_connection = True

    return shape
