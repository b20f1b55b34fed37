"""A reference OpenAI-style streaming server with known timing, in raw asyncio.

Every streamed completion waits ``--first-token-ms`` after the request was read, writes
the first token, then one token every ``--interval-ms`` (deadlines are absolute, so
jitter does not accumulate) until ``max_tokens``, then a usage block and ``[DONE]``.
For each request it records, on the shared monotonic clock (``time.perf_counter`` is
CLOCK_MONOTONIC on Linux, comparable across processes), when the request was read and
when the first token was written: ``GET /records`` returns them, ``POST /reset`` clears.

Raw asyncio keeps the server's own overhead small and its records precise, so that a
client benchmark measures the client.  Prints ``LISTENING <port>`` once bound.

    python bench/reference_server.py --port 0 --first-token-ms 50 --interval-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

HEADERS_SSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def plain_response(status: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    )


class ReferenceServer:
    """Serves the streaming endpoints and keeps the first-token records."""

    def __init__(self, first_token_s: float, interval_s: float, usage: bool = True, time_scale: float = 1.0, model: str = "reference-model") -> None:
        self.first_token_s = first_token_s
        self.interval_s = interval_s
        self.usage = usage
        self.time_scale = time_scale
        self.model = model
        self.arrivals: list[float] = []
        self.first_tokens: list[float] = []
        self.token_event = {
            False: chunk(b'data: {"id":"r","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n'),
            True: chunk(b'data: {"id":"r","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'),
        }

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    if line[:15].lower() == "content-length:":
                        length = int(line[15:].strip())
                body = await reader.readexactly(length) if length else b""
                if length:
                    arrived = time.perf_counter()
                await self.route(method, path, body, arrived, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def route(self, method: str, path: str, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> None:
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            await self.stream(json.loads(body or b"{}"), path.endswith("chat/completions"), arrived, writer)
        elif path == "/v1/models":
            writer.write(plain_response("200 OK", {"object": "list", "data": [{"id": self.model, "object": "model"}]}))
        elif path in ("/server_info", "/get_server_info"):
            writer.write(plain_response("200 OK", {"engine": "reference", "time_scale": self.time_scale}))
        elif path == "/health":
            writer.write(plain_response("200 OK", {}))
        elif path == "/records":
            writer.write(plain_response("200 OK", {"arrivals": self.arrivals, "first_tokens": self.first_tokens}))
        elif path == "/reset" and method == "POST":
            self.arrivals, self.first_tokens = [], []
            writer.write(plain_response("200 OK", {}))
        else:
            writer.write(plain_response("404 Not Found", {"error": path}))
        await writer.drain()

    async def stream(self, request: dict, chat: bool, arrived: float, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        tokens = int(request.get("max_tokens") or 16)
        prompt = request.get("prompt") or " ".join(m.get("content", "") for m in request.get("messages", []))
        writer.write(HEADERS_SSE)
        event = self.token_event[chat]
        # loop.time() and perf_counter() are both CLOCK_MONOTONIC: deadlines in loop time.
        start = loop.time() + (arrived - time.perf_counter())
        for i in range(tokens):
            delay = start + self.first_token_s + i * self.interval_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(event)
            if i == 0:
                self.arrivals.append(arrived)
                self.first_tokens.append(time.perf_counter())
            if i % 32 == 31:
                await writer.drain()
        if self.usage:
            usage = {"prompt_tokens": len(str(prompt).split()), "completion_tokens": tokens, "total_tokens": 0}
            writer.write(chunk(b"data: " + json.dumps({"id": "r", "choices": [], "usage": usage}).encode() + b"\n\n"))
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def serve(args: argparse.Namespace) -> None:
    server = ReferenceServer(args.first_token_ms / 1000, args.interval_ms / 1000, not args.no_usage, args.time_scale, args.model)
    listener = await asyncio.start_server(server.handle, args.host, args.port, backlog=4096)
    port = listener.sockets[0].getsockname()[1]
    print(f"LISTENING {port}", flush=True)
    async with listener:
        await listener.serve_forever()


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
