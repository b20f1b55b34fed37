"""The SSE parser of every hot path (``SseTimer``) and the aiohttp/httpx hot paths.

The default hot path is ``tools.loadgen.conn`` (asyncio Protocol, no task switch per
event).  Two library clients remain selectable and share the parser:
- ``aiohttp``: its C HTTP parser keeps up with 64 streams; at 256 the coroutine
  wake-up per event adds milliseconds to TTFT (bench/loadgen_accuracy.py);
- ``httpx``: the project's standard client; its pure-Python HTTP/1.1 stack (h11) costs
  more per SSE event, so at high concurrency it falls behind the server.
Both are sharded over small connection pools: httpcore's pool is O(n^2) in its number
of connections per request, and aiohttp's connector is fast with one pool, so aiohttp
uses a single session.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from time import perf_counter
from typing import Any

import aiohttp
import httpx

from tools.loadgen.stats import RequestOutcome

#: connections per httpx client (see module docstring).
CONNECTIONS_PER_HTTPX_CLIENT = 4


#: a non-empty JSON string value of the content keys (a quote inside a JSON string is
#: always escaped, so an unescaped ``"text":`` is a key, never text).  ``[^"]`` after the
#: opening quote means at least one character: an escape sequence counts.
_COMPLETION_CONTENT = re.compile(rb'"text"\s*:\s*"[^"]')
_CHAT_CONTENT = re.compile(rb'"(?:content|reasoning_content)"\s*:\s*"[^"]')
#: a usage block that is an object (``"usage": null`` rides on every SGLang chunk).
_USAGE_OBJECT = re.compile(rb'"usage"\s*:\s*\{')
#: the simulated node's clock on each event (tools/simnode/engine.py): the request's
#: arrival and the event's step, in node seconds.  Real engines send neither.
_NODE_CLOCK = re.compile(rb'"node_t0"\s*:\s*(-?[0-9.eE+-]+)\s*,\s*"node_t"\s*:\s*(-?[0-9.eE+-]+)')


def _decoded_content(event: dict[str, Any], chat: bool) -> bool:
    """Whether a decoded event carries text, the way SGLang/vLLM decide it."""
    choices = event.get("choices")
    if not choices:
        return False
    choice = choices[0]
    if chat:
        delta = choice.get("delta") or {}
        return bool(delta.get("content") or delta.get("reasoning_content"))
    return bool(choice.get("text"))


class SseTimer:
    """Incremental SSE parser that stamps content events with their read time.

    Hot path: bytes operations only.  JSON is decoded for the first content event
    (exact check, and proof the stream is JSON), for a usage object, and nowhere
    else: later events are classified by ``_COMPLETION_CONTENT``/``_CHAT_CONTENT``,
    which match exactly when a content key holds a non-empty string.  Any payload that
    does not start with ``{`` is a bad event.
    """

    __slots__ = (
        "buf",
        "chat",
        "chunks",
        "content",
        "done",
        "end",
        "itl",
        "last",
        "node",
        "node_events",
        "node_first",
        "node_itl",
        "node_last",
        "node_t0",
        "st",
        "ttft",
        "usage",
    )

    def __init__(self, chat: bool, st: float) -> None:
        self.chat = chat
        self.content = _CHAT_CONTENT.search if chat else _COMPLETION_CONTENT.search
        self.st = st
        self.buf = b""
        self.ttft = self.last = self.end = 0.0
        self.itl: list[float] = []
        self.chunks = 0
        self.usage: dict[str, Any] | None = None
        self.done = False
        # the node's clock, when every event carries it (see _NODE_CLOCK)
        self.node = self.node_t0 = self.node_first = self.node_last = 0.0
        self.node_events = 0
        self.node_itl: list[float] = []

    def feed(self, raw: bytes, now: float) -> None:
        buf = self.buf + raw if self.buf else raw
        pos = 0
        find = buf.find
        while (nl := find(b"\n", pos)) >= 0:
            if buf.startswith(b"data:", pos):  # else blank separators, comments, "event:" lines
                self.event(buf[pos + 5 : nl].strip(), now)
            pos = nl + 1
        self.buf = buf[pos:] if pos < len(buf) else b""

    def event(self, payload: bytes, now: float) -> None:
        if payload[:1] != b"{":
            if payload == b"[DONE]":
                self.done, self.end = True, now
                return
            raise ValueError(f"not a JSON object: {payload[:60]!r}")
        node_t = 0.0
        # events up to the first content one say whether the server stamps its clock: a real
        # engine's later events are never searched (its hot path stays one parse per event)
        clock = _NODE_CLOCK.search(payload) if self.node_events or not (self.chunks or self.usage) else None
        if clock is not None:
            self.node_events += 1
            self.node_t0, node_t = float(clock[1]), float(clock[2])
            self.node = max(self.node, node_t)
        has_content = self.content(payload) is not None
        if _USAGE_OBJECT.search(payload) or (has_content and not self.chunks):
            event = json.loads(payload)
            if not isinstance(event, dict):
                raise ValueError(f"not a JSON object: {payload[:60]!r}")
            if event.get("usage"):
                self.usage = event["usage"]
            has_content = _decoded_content(event, self.chat)
        if has_content:
            if self.chunks:
                self.itl.append(now - self.last)
                if clock is not None:
                    self.node_itl.append(node_t - self.node_last)
            else:
                self.ttft = now - self.st
                self.node_first = node_t
            self.last = now
            self.node_last = node_t
            self.chunks += 1

    def outcome(self) -> RequestOutcome:
        if not self.done:
            return RequestOutcome(
                ok=False, error=f"broken stream: ended without [DONE] after {self.chunks} content events"
            )
        if not self.chunks:
            return RequestOutcome(ok=False, error="broken stream: no content before [DONE]")
        usage = self.usage or {}
        tokens = usage.get("completion_tokens")
        counted = isinstance(tokens, int) and not isinstance(tokens, bool)
        output_tokens = tokens if counted and isinstance(tokens, int) else self.chunks
        if self.node_events and self.node_events >= self.chunks:  # every content event carried the clock
            return RequestOutcome(
                ok=True,
                ttft_s=self.node_first - self.node_t0,
                e2e_s=self.node - self.node_t0,
                itl_s=self.node_itl,
                output_tokens=output_tokens,
                input_tokens=int(usage.get("prompt_tokens") or 0),
                usage=counted,
                clock="node",
                start_s=self.node_t0,
                end_s=self.node,
            )
        return RequestOutcome(
            ok=True,
            ttft_s=self.ttft,
            e2e_s=self.end - self.st,
            itl_s=self.itl,
            output_tokens=output_tokens,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            usage=counted,
        )


def _bad_event(exc: Exception) -> RequestOutcome:
    return RequestOutcome(ok=False, error=f"broken stream: bad SSE event: {exc}"[:300])


async def stream_httpx(
    client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], chat: bool
) -> RequestOutcome:
    timer = SseTimer(chat, perf_counter())
    try:
        async with client.stream("POST", url, content=body, headers=headers) as resp:
            if resp.status_code != 200:
                text = (await resp.aread())[:200].decode("utf-8", "replace").strip()
                return RequestOutcome(ok=False, error=f"HTTP {resp.status_code}: {text}")
            async for raw in resp.aiter_bytes():
                timer.feed(raw, perf_counter())
    except httpx.TimeoutException as exc:
        return RequestOutcome(ok=False, error=f"timeout: {type(exc).__name__} after {perf_counter() - timer.st:.1f}s")
    except httpx.HTTPError as exc:
        return RequestOutcome(ok=False, error=f"broken stream: {type(exc).__name__}: {exc}"[:300])
    except (ValueError, AttributeError, TypeError) as exc:
        return _bad_event(exc)
    return timer.outcome()


async def stream_aiohttp(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], chat: bool
) -> RequestOutcome:
    timer = SseTimer(chat, perf_counter())
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            if resp.status != 200:
                text = (await resp.content.read(200)).decode("utf-8", "replace").strip()
                return RequestOutcome(ok=False, error=f"HTTP {resp.status}: {text}")
            async for raw in resp.content.iter_any():
                timer.feed(raw, perf_counter())
    except (aiohttp.ServerTimeoutError, aiohttp.SocketTimeoutError) as exc:
        return RequestOutcome(ok=False, error=f"timeout: {type(exc).__name__} after {perf_counter() - timer.st:.1f}s")
    except aiohttp.ClientError as exc:
        return RequestOutcome(ok=False, error=f"broken stream: {type(exc).__name__}: {exc}"[:300])
    except (ValueError, AttributeError, TypeError) as exc:
        return _bad_event(exc)
    return timer.outcome()


async def preopen_aiohttp(session: aiohttp.ClientSession, url: str, count: int) -> None:
    """Fill the pool with ``count`` connections: that many GETs in flight at once."""

    async def one() -> None:
        async with session.get(url) as resp:
            await resp.read()

    await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)


def httpx_clients(connections: int, timeout_s: float) -> list[httpx.AsyncClient]:
    """Enough small httpx clients for ``connections`` keep-alive connections in total.

    One TLS context is shared (httpx builds one per client otherwise, milliseconds
    each); ``trust_env=False`` so a proxy variable cannot reroute traffic to a node.
    """
    shards = max(1, -(-connections // CONNECTIONS_PER_HTTPX_CLIENT))
    per_client = min(connections, CONNECTIONS_PER_HTTPX_CLIENT)
    limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client, keepalive_expiry=60)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
    tls = ssl.create_default_context()
    return [httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False, verify=tls) for _ in range(shards)]


def aiohttp_session(connections: int, timeout_s: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(timeout_s, 30.0), sock_read=timeout_s)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False, read_bufsize=1 << 20)
