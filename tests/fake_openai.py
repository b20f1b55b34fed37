"""A scripted OpenAI-compatible server on 127.0.0.1, for tests of anything that talks
to an LLM through the `openai` client.

Real HTTP (aiohttp) in a background thread.  Each test scripts the replies in
order (`server.script(...)`); every request received is recorded with its headers
and JSON body, so a test can count retries, read the prompt and check that an
Authorization header was sent.  When the script runs out the server answers 500
with `x-should-retry: false`, so an unscripted call fails loudly, once.

    with FakeOpenAI() as server:
        server.script(status(429), proposal(name="x", flags={"tp-size": 4}))
        client = OpenAI(base_url=server.url, api_key="k")
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    """One scripted answer: a chat completion with `content`, or an HTTP error."""

    status: int = 200
    content: str | None = None
    body: dict[str, Any] | None = None  # a full JSON body instead of a completion
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 120
    completion_tokens: int = 40


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at: float  # time.monotonic() on arrival

    def prompt_text(self) -> str:
        """All message contents of a chat request, joined."""
        messages = (self.body or {}).get("messages", [])
        return "\n".join(str(m.get("content", "")) for m in messages)


# ------------------------------------------------------------------- reply helpers
def text(content: str, **kw: Any) -> Reply:
    return Reply(content=content, **kw)


def answer(obj: Any, **kw: Any) -> Reply:
    """A completion whose content is `obj` as JSON."""
    return Reply(content=json.dumps(obj), **kw)


def proposal(
    name: str = "try-it",
    *,
    flags: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
    unset_flags: list[str] | None = None,
    patch: str | None = None,
    revisit_of: str | None = None,
    rationale: str = "because",
    expected_effect: str = "+3% at C=64",
    **kw: Any,
) -> Reply:
    """A proposal in the strict wire form ({"name", "value"} pairs)."""
    return answer(
        {
            "name": name,
            "rationale": rationale,
            "expected_effect": expected_effect,
            "flags": [{"name": k, "value": v} for k, v in (flags or {}).items()],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
            "unset_flags": unset_flags or [],
            "patch": patch,
            "revisit_of": revisit_of,
        },
        **kw,
    )


def status(code: int, message: str = "scripted error", **kw: Any) -> Reply:
    return Reply(status=code, body={"error": {"message": message, "type": "fake", "code": code}}, **kw)


def delayed(seconds: float, reply: Reply | None = None) -> Reply:
    base = reply or text("{}")
    base.delay_s = seconds
    return base


class FakeOpenAI:
    """The server.  `url` is the base URL to give the client (ends in /v1)."""

    def __init__(self, model: str = "fake-model") -> None:
        self.model = model
        self.requests: list[Received] = []
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-openai", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> FakeOpenAI:
        with self._lock:
            self._queue.extend(replies)
        return self

    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[Received]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    # -------------------------------------------------------------- handlers
    async def _record(self, request: web.Request) -> None:
        body = None
        if request.can_read_body:
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = {"_unparsed": (await request.text())[:2000]}
        self.requests.append(Received(request.method, request.path, dict(request.headers), body, time.monotonic()))

    async def _models(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        )

    async def _chat(self, request: web.Request) -> web.Response:
        await self._record(request)
        with self._lock:
            reply = self._queue.pop(0) if self._queue else None
        if reply is None:
            reply = status(500, "fake_openai: script exhausted", headers={"x-should-retry": "false"})
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200 or reply.body is not None:
            return web.json_response(reply.body or {}, status=reply.status, headers=reply.headers)
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (self.requests[-1].body or {}).get("model", self.model),
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply.content}}
            ],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }
        return web.json_response(body, headers=reply.headers)
