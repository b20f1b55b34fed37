"""The default streaming hot path: one asyncio Protocol per keep-alive HTTP/1.1 connection.

Why not aiohttp: with 256 streams that each get an SSE event every decode step, a
client that wakes a coroutine per event spends most of its time in task switches, and
stamps an event only when its coroutine runs - after every other ready callback.  Here
``data_received`` stamps ``perf_counter()`` on entry (the loop has just read the
socket), undoes the chunked framing and times the SSE events in the same callback
(``SseTimer``); the request's coroutine wakes once, when the response has ended.

Timing: ``st`` is taken just before the request bytes are written (``transport.write``
sends at once when its buffer is empty), so TTFT = first content event read - request
written.  Connections are opened before a level (``SlotConnections.ensure``) so that
TCP connect is not in TTFT; a connection the server closed is reopened inside the
timing of the request that needs it, as vLLM's pooled session does.
"""

from __future__ import annotations

import asyncio
import ssl
from time import perf_counter
from urllib.parse import urlsplit

from tools.loadgen.stats import RequestOutcome
from tools.loadgen.stream import SseTimer

#: bytes of a non-200 body kept for the error message.
ERROR_BODY_LIMIT = 200
_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _IDLE = range(5)


class SseConnection(asyncio.Protocol):
    """Sends one request at a time and parses its response as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.state = _IDLE
        self.buf = b""
        self.remaining = 0  # chunk or body bytes left; -1: a chunk's CRLF is due
        self.status = 0
        self.keep_alive = True
        self.timer: SseTimer | None = None
        self.error_body = b""
        self.waiter: asyncio.Future[RequestOutcome] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP (or TLS) connection's
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.state == _UNTIL_CLOSE:
            self._finish()
        elif self.state != _IDLE:
            reason = f"{type(exc).__name__}: {exc}" if exc else "connection closed by the server"
            self._fail(f"broken stream: {reason}")

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def start(self, request: bytes, timer: SseTimer) -> asyncio.Future[RequestOutcome]:
        """Write ``request``; the future resolves when its response has ended."""
        assert self.transport is not None and self.state == _IDLE
        self.state, self.buf, self.status, self.keep_alive = _HEAD, b"", 0, True
        self.timer, self.error_body = timer, b""
        self.waiter = asyncio.get_running_loop().create_future()
        timer.st = perf_counter()
        self.transport.write(request)
        return self.waiter

    def abort(self) -> None:
        self.closed = True
        self.state = _IDLE
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        now = perf_counter()
        try:
            if self.state == _HEAD:
                data = self._head(self.buf + data if self.buf else data)
            if self.state == _CHUNKED:
                self._chunked(data, now)
            elif self.state == _LENGTH:
                take = data[: self.remaining]
                self.remaining -= len(take)
                self._sink(take, now)
                if self.remaining <= 0:
                    self._finish()
            elif self.state == _UNTIL_CLOSE:
                self._sink(data, now)
        except (ValueError, AttributeError, TypeError) as exc:
            self._fail(f"broken stream: bad SSE event: {exc}"[:300])
            self.abort()

    def _head(self, data: bytes) -> bytes:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            self.buf = data
            return b""  # still _HEAD: nothing below runs
        self.buf = b""
        lines = data[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        try:
            self.status = int(parts[1])
        except (IndexError, ValueError):
            self._fail(f"broken stream: bad status line {lines[0][:80]!r}")
            self.abort()
            return b""
        length, chunked = -1, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "transfer-encoding":
                chunked = "chunked" in value
            elif name == "content-length":
                length = int(value)
            elif name == "connection":
                self.keep_alive = value != "close"
        if parts[0] == "HTTP/1.0":
            self.keep_alive = False
        if chunked:
            self.state, self.remaining = _CHUNKED, 0
        elif length >= 0:
            self.state, self.remaining = _LENGTH, length
            if length == 0:
                self._finish()
        else:
            self.state, self.keep_alive = _UNTIL_CLOSE, False
        return data[end + 4 :]

    def _chunked(self, data: bytes, now: float) -> None:
        buf = self.buf + data if self.buf else data
        pos, size = 0, len(buf)
        while pos < size and self.state == _CHUNKED:
            if self.remaining > 0:
                take = min(self.remaining, size - pos)
                self._sink(buf[pos : pos + take], now)
                pos += take
                self.remaining -= take
                if self.remaining == 0:
                    self.remaining = -1
            elif self.remaining == -1:
                if size - pos < 2:
                    break
                pos, self.remaining = pos + 2, 0
            else:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    break
                length = int(buf[pos:nl].split(b";", 1)[0], 16)
                if length == 0:  # last chunk; an empty line ends the (rare) trailers
                    rest = buf[nl + 2 :]
                    if not (rest.startswith(b"\r\n") or b"\r\n\r\n" in rest):
                        break  # wait for the end of the trailers
                    self._finish()
                    pos = size
                    break
                pos, self.remaining = nl + 2, length
        self.buf = buf[pos:] if pos < size else b""

    def _sink(self, data: bytes, now: float) -> None:
        if self.status == 200:
            assert self.timer is not None  # set with the request
            self.timer.feed(data, now)
        elif len(self.error_body) < ERROR_BODY_LIMIT:
            self.error_body += data[: ERROR_BODY_LIMIT - len(self.error_body)]

    def _finish(self) -> None:
        if self.status == 200:
            assert self.timer is not None
            outcome = self.timer.outcome()
        else:
            text = self.error_body.decode("utf-8", "replace").strip()
            outcome = RequestOutcome(ok=False, error=f"HTTP {self.status}: {text}")
        self.state = _IDLE
        if not self.keep_alive:
            self.abort()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(outcome)

    def _fail(self, error: str) -> None:
        self.state = _IDLE
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(RequestOutcome(ok=False, error=error))


class SlotConnections:
    """One connection per in-flight slot to the streaming endpoint of ``url``."""

    def __init__(self, url: str, headers: dict[str, str], connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.ssl = ssl.create_default_context() if self.tls else None
        self.connect_timeout_s = connect_timeout_s
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in ("host", "content-length"))
        self.head = f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n{extra}".encode("latin-1")
        self.slots: dict[int, SseConnection] = {}

    async def connect(self) -> SseConnection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout_s):
            _, conn = await loop.create_connection(SseConnection, self.host, self.port, ssl=self.ssl)
        return conn

    async def ensure(self, slots: int) -> None:
        """Open the missing or closed connections of slots 0..slots-1, concurrently.

        A slot that cannot connect stays empty: its request reports the error.  Slots
        from a larger earlier level are closed: no idle connections held on the server.
        """
        for slot in [s for s in self.slots if s >= slots]:
            self.slots.pop(slot).abort()
        missing = [s for s in range(slots) if s not in self.slots or self.slots[s].closed]
        opened = await asyncio.gather(*(self.connect() for _ in missing), return_exceptions=True)
        for slot, conn in zip(missing, opened):
            if isinstance(conn, SseConnection):
                self.slots[slot] = conn

    async def send(self, slot: int, body: bytes, chat: bool) -> RequestOutcome:
        request = self.head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        conn = self.slots.get(slot)
        timer = SseTimer(chat, perf_counter())
        if conn is None or conn.closed:
            try:
                conn = self.slots[slot] = await self.connect()  # inside the timing, as vLLM
            except (OSError, TimeoutError) as exc:
                return RequestOutcome(
                    ok=False, error=f"broken stream: cannot connect: {type(exc).__name__}: {exc}"[:300]
                )
            st = timer.st
            waiter = conn.start(request, timer)
            timer.st = st
        else:
            waiter = conn.start(request, timer)
        try:
            return await waiter
        except asyncio.CancelledError:  # timeout: the response is incomplete, drop the connection
            conn.abort()
            raise

    def close(self) -> None:
        for conn in self.slots.values():
            conn.abort()
        self.slots.clear()
