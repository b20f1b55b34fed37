"""A reference OpenAI-style streaming server with known timing, on raw non-blocking sockets.

What it records, per streamed request, on CLOCK_MONOTONIC (``time.perf_counter`` on
Linux, comparable across processes):
- ``arrivals``: when the request's last byte reached this host's TCP stack - the kernel
  receive timestamp (``SO_TIMESTAMPNS``) of the segment that completed the request,
  converted from CLOCK_REALTIME; ``perf_counter()`` at read time where the kernel gives
  none.  Not the time this process got round to reading it: with 256 requests arriving
  at once, the read of the last one is milliseconds late, and that queueing is the
  server's, so it belongs inside the server's TTFT, not outside it;
- ``reads``: when this process read it (``reads - arrivals`` = the server's read delay);
- ``first_tokens``: when the first token event was handed to the kernel (``send``
  returned); ``buffered_writes`` counts writes the kernel could not take at once (then a
  record is the hand-over time to our buffer: none are expected here).
TTFT_server = first_tokens - arrivals.  The schedule runs from ``arrivals`` too: the first
token is due ``--first-token-ms`` after it, then one token every ``--interval-ms``
(absolute deadlines, so jitter does not accumulate), then a usage block and ``[DONE]``.
Streams that arrive together stay in step, as the requests of one decode batch do in
SGLang/vLLM (every running request gets its token from the same forward pass).

``GET /records`` returns the records, ``POST /reset`` clears them.  Prints
``LISTENING <port>`` once bound.

    python bench/reference_server.py --port 0 --first-token-ms 50 --interval-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import time

#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS); Python's socket module does not name it.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ANCILLARY_SPACE = socket.CMSG_SPACE(16)
HEADERS_SSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def plain_response(status: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data


def kernel_arrival(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The SO_TIMESTAMPNS stamp of a ``recvmsg`` as a ``perf_counter`` value."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            realtime_minus_monotonic = time.time_ns() - time.perf_counter_ns()
            return (sec * 1_000_000_000 + nsec - realtime_minus_monotonic) / 1e9
    return None


class Connection:
    """One client connection: reads requests, serves them one at a time."""

    def __init__(self, server: ReferenceServer, sock: socket.socket) -> None:
        self.server, self.sock = server, sock
        self.loop = asyncio.get_running_loop()
        self.buf = b""
        self.out = b""
        self.busy = False
        self.open = True
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.arrived = self.read_at = 0.0
        self.loop.add_reader(sock, self.on_readable)

    def on_readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 16, ANCILLARY_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.close()
        if not data:
            return self.close()
        self.read_at = time.perf_counter()
        self.arrived = kernel_arrival(ancillary) or self.read_at
        self.buf += data
        self.next_request()

    def next_request(self) -> None:
        while self.open and not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                if line[:15].lower() == "content-length:":
                    length = int(line[15:].strip())
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path, _ = lines[0].split(" ", 2)
            self.server.route(self, method, path, body)

    def write(self, data: bytes) -> None:
        if not self.open:
            return
        if self.out:
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            return self.close()
        if sent < len(data):
            self.server.buffered_writes += 1
            self.out = data[sent:]
            self.loop.add_writer(self.sock, self.on_writable)

    def on_writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.close()
        self.out = self.out[sent:]
        if not self.out:
            self.loop.remove_writer(self.sock)

    def close(self) -> None:
        if self.open:
            self.open = False
            self.loop.remove_reader(self.sock)
            self.loop.remove_writer(self.sock)
            self.sock.close()


class ReferenceServer:
    """Routes requests, runs the token schedules, keeps the first-token records."""

    def __init__(
        self,
        first_token_s: float,
        interval_s: float,
        usage: bool = True,
        time_scale: float = 1.0,
        model: str = "reference-model",
    ) -> None:
        self.first_token_s, self.interval_s = first_token_s, interval_s
        self.usage, self.time_scale, self.model = usage, time_scale, model
        self.arrivals: list[float] = []
        self.reads: list[float] = []
        self.first_tokens: list[float] = []
        self.buffered_writes = 0
        self.token_event = {
            False: chunk(
                b'data: {"id":"r","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n'
            ),
            True: chunk(
                b'data: {"id":"r","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'
            ),
        }

    def route(self, conn: Connection, method: str, path: str, body: bytes) -> None:
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            self.stream(conn, json.loads(body or b"{}"), path.endswith("chat/completions"))
        elif path == "/v1/models":
            conn.write(plain_response("200 OK", {"object": "list", "data": [{"id": self.model, "object": "model"}]}))
        elif path in ("/server_info", "/get_server_info"):
            conn.write(plain_response("200 OK", {"engine": "reference", "time_scale": self.time_scale}))
        elif path == "/health":
            conn.write(plain_response("200 OK", {}))
        elif path == "/records":
            conn.write(
                plain_response(
                    "200 OK",
                    {
                        "arrivals": self.arrivals,
                        "reads": self.reads,
                        "first_tokens": self.first_tokens,
                        "buffered_writes": self.buffered_writes,
                    },
                )
            )
        elif path == "/reset" and method == "POST":
            self.arrivals, self.reads, self.first_tokens, self.buffered_writes = [], [], [], 0
            conn.write(plain_response("200 OK", {}))
        else:
            conn.write(plain_response("404 Not Found", {"error": path}))

    def stream(self, conn: Connection, request: dict, chat: bool) -> None:
        tokens = max(1, int(request.get("max_tokens") or 16))
        prompt = request.get("prompt") or " ".join(m.get("content", "") for m in request.get("messages", []))
        arrived, read_at = conn.arrived, conn.read_at
        start = arrived + self.first_token_s + (conn.loop.time() - time.perf_counter())  # in loop time
        event = self.token_event[chat]
        conn.busy = True
        conn.write(HEADERS_SSE)

        def emit(i: int) -> None:
            conn.write(event)
            if i == 0:
                self.first_tokens.append(time.perf_counter())
                self.arrivals.append(arrived)
                self.reads.append(read_at)
            if i + 1 < tokens:
                conn.loop.call_at(start + (i + 1) * self.interval_s, emit, i + 1)
                return
            if self.usage:
                usage = {"prompt_tokens": len(str(prompt).split()), "completion_tokens": tokens, "total_tokens": 0}
                conn.write(chunk(b"data: " + json.dumps({"id": "r", "choices": [], "usage": usage}).encode() + b"\n\n"))
            conn.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            conn.busy = False
            conn.next_request()

        conn.loop.call_at(start, emit, 0)


async def serve(args: argparse.Namespace) -> None:
    server = ReferenceServer(
        args.first_token_ms / 1000, args.interval_ms / 1000, not args.no_usage, args.time_scale, args.model
    )
    listener = socket.create_server((args.host, args.port), backlog=4096)
    # stamp receives from the start: Linux turns stamping on for the whole host lazily
    # (a deferred job after the first socket asks), and accepted sockets inherit the flag,
    # so the first request is not left unstamped on a loaded machine
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    listener.setblocking(False)
    loop = asyncio.get_running_loop()

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. out of descriptors: the client sees a refused or reset connection
            Connection(server, sock)

    loop.add_reader(listener, accept)
    print(f"LISTENING {listener.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--first-token-ms", type=float, default=50.0)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--model", default="reference-model")
    parser.add_argument("--no-usage", action="store_true", help="stream no usage block (clients must count chunks)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
