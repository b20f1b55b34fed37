"""tools.loadgen.conn against raw asyncio servers on 127.0.0.1 that write scripted bytes.

Each server answers every request with bytes chosen by the test (chunked, with a
Content-Length, until close, split into small pieces), so the HTTP framing and the
SSE timing of the Protocol are exercised on a real socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from tools.loadgen.conn import SlotConnections
from tools.loadgen.stats import RequestOutcome

#: request number -> pieces to write (a final b"" closes the connection after them),
#: or None to close it without answering.
Responder = Callable[[int], list[bytes] | None]


def sse(event: dict | str) -> bytes:
    return b"data: " + (event.encode() if isinstance(event, str) else json.dumps(event).encode()) + b"\n\n"


def completion_events(tokens: int) -> bytes:
    body = b"".join(sse({"choices": [{"index": 0, "text": f" t{i}"}], "usage": None}) for i in range(tokens))
    return body + sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": tokens}}) + sse("[DONE]")


def chunked(body: bytes, size: int = 40, trailer: bytes = b"") -> bytes:
    frames = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    )
    return frames + b"0\r\n" + trailer + b"\r\n"


def ok_head(extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + extra


def split(data: bytes, piece: int) -> list[bytes]:
    return [data[i : i + piece] for i in range(0, len(data), piece)]


async def serve(respond: Responder, body: Callable[[str, dict], Awaitable[object]], gap_s: float = 0.0) -> object:
    """Run ``body(url, stats)`` against a server that answers request n with ``respond(n)``."""
    stats = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                stats["requests"] += 1
                pieces = respond(stats["requests"])
                if pieces is None:
                    break
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    if gap_s:
                        await asyncio.sleep(gap_s)
                if pieces and pieces[-1] == b"":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await body(f"http://127.0.0.1:{port}/v1/completions", stats)
    finally:
        server.close()


def run(respond: Responder, requests: int = 1, slots: int = 1, gap_s: float = 0.0) -> tuple[list[RequestOutcome], dict]:
    async def body(url: str, stats: dict) -> tuple[list[RequestOutcome], dict]:
        pool = SlotConnections(url, {"Content-Type": "application/json"}, connect_timeout_s=5)
        await pool.ensure(slots)
        opened = stats["connections"]
        outcomes = []
        for n in range(requests):
            outcomes.append(await pool.send(n % slots, b'{"prompt": "x"}', chat=False))
        pool.close()
        return outcomes, stats | {"opened_before_requests": opened}

    return asyncio.run(serve(respond, body, gap_s))  # type: ignore[return-value]


def test_chunked_stream_split_into_small_pieces_is_timed_per_event() -> None:
    response = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(completion_events(6), size=33)
    outcomes, _ = run(lambda n: split(response, 7), gap_s=0.002)
    (o,) = outcomes
    assert o.ok, o.error
    assert o.output_tokens == 6 and o.usage and o.input_tokens == 3
    assert len(o.itl_s) == 5 and all(gap > 0 for gap in o.itl_s)
    assert 0 < o.ttft_s < o.e2e_s


def test_content_length_body_and_chunk_trailers() -> None:
    events = completion_events(4)
    with_length = ok_head(b"Content-Length: %d\r\n\r\n" % len(events)) + events
    with_trailer = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(events, trailer=b"X-Checksum: 1\r\n")
    outcomes, stats = run(lambda n: [with_length if n % 2 else with_trailer], requests=4)
    assert all(o.ok and o.output_tokens == 4 for o in outcomes), [o.error for o in outcomes]
    assert stats["connections"] == 1  # both framings leave the connection reusable


def test_body_until_close_and_connection_close_reconnect_inside_the_request() -> None:
    until_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + completion_events(3)
    closing = ok_head(b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n") + chunked(completion_events(3))

    outcomes, stats = run(lambda n: [until_close, b""] if n == 1 else [closing, b""], requests=3)
    assert all(o.ok and o.output_tokens == 3 for o in outcomes), [o.error for o in outcomes]
    assert stats["opened_before_requests"] == 1 and stats["connections"] == 3


def test_http_errors_keep_the_connection_and_report_the_body() -> None:
    error = b'{"error": "overloaded"}'
    busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error)
    good = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(completion_events(2))
    outcomes, stats = run(lambda n: [busy] if n == 1 else [good], requests=2)
    assert not outcomes[0].ok and outcomes[0].error == 'HTTP 503: {"error": "overloaded"}'
    assert outcomes[1].ok and stats["connections"] == 1


def test_broken_and_malformed_streams_are_errors() -> None:
    events = completion_events(5)
    cut = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(events)[:120]
    garbage = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(b"data: <html>oops</html>\n\n" + events)
    outcomes, _ = run(lambda n: [cut, b""] if n == 1 else [garbage], requests=2)
    assert not outcomes[0].ok and outcomes[0].error.startswith("broken stream")
    assert not outcomes[1].ok and "bad SSE event" in outcomes[1].error
    refused = SlotConnections("http://127.0.0.1:9/v1/completions", {}, connect_timeout_s=2)

    async def send() -> RequestOutcome:
        await refused.ensure(1)  # cannot connect: the slot stays empty, the request reports it
        return await refused.send(0, b"{}", chat=False)

    outcome = asyncio.run(send())
    assert not outcome.ok and outcome.error.startswith("broken stream: cannot connect")


def test_ensure_opens_one_connection_per_slot_before_the_clock_and_requests_reuse_them() -> None:
    response = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(completion_events(2))

    async def body(url: str, stats: dict) -> tuple[int, list[RequestOutcome], int]:
        pool = SlotConnections(url, {}, connect_timeout_s=5)
        await pool.ensure(4)
        await asyncio.sleep(0.05)
        opened = stats["connections"]
        outcomes = await asyncio.gather(*(pool.send(slot, b"{}", chat=False) for slot in range(4)))
        outcomes += await asyncio.gather(*(pool.send(slot, b"{}", chat=False) for slot in range(4)))
        await pool.ensure(4)  # all open: nothing new
        total = stats["connections"]
        await pool.ensure(2)  # a smaller level keeps slots 0 and 1 only
        assert sorted(pool.slots) == [0, 1] and all(not c.closed for c in pool.slots.values())
        pool.close()
        return opened, outcomes, total

    opened, outcomes, total = asyncio.run(serve(lambda n: [response], body))  # type: ignore[misc]
    assert opened == 4 and total == 4
    assert all(o.ok for o in outcomes)


def test_a_timeout_drops_the_connection_and_the_next_request_reconnects() -> None:
    good = ok_head(b"Transfer-Encoding: chunked\r\n\r\n") + chunked(completion_events(2))
    headers_only = ok_head(b"Transfer-Encoding: chunked\r\n\r\n")

    async def body(url: str, stats: dict) -> tuple[RequestOutcome, int]:
        pool = SlotConnections(url, {}, connect_timeout_s=5)
        await pool.ensure(1)
        try:
            async with asyncio.timeout(0.2):
                await pool.send(0, b"{}", chat=False)
        except TimeoutError:
            pass
        outcome = await pool.send(0, b"{}", chat=False)
        pool.close()
        return outcome, stats["connections"]

    outcome, connections = asyncio.run(serve(lambda n: [headers_only] if n == 1 else [good], body))  # type: ignore[misc]
    assert outcome.ok and connections == 2
