"""OpenAI-compatible HTTP routes of the simulated node (SGLang's shapes and SSE framing)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from tools.simnode.batchcore import Seq
from tools.simnode.engine import StreamState
from tools.simnode.faults import inject, outage_middleware
from tools.simnode.perfmodel import accept_length
from tools.simnode.server import SimNode
from tools.simnode.textgen import TextStream, count_tokens, prompt_predictability


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {
            "object": "error",
            "message": message,
            "type": "BadRequestError" if status == 400 else "ServiceUnavailable",
            "param": None,
            "code": status,
        },
        status=status,
    )


def _chat_prompt(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for m in messages:
        content = m.get("content", "") if isinstance(m, dict) else ""
        if isinstance(content, list):
            content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        parts.append(f"<|im_start|>{m.get('role', 'user') if isinstance(m, dict) else 'user'}\n{content}<|im_end|>")
    return "\n".join(parts) + "\n<|im_start|>assistant\n"


def _completion_prompt(prompt: Any) -> str:
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return " ".join(f"t{t}" for t in prompt)
    if not isinstance(prompt, str):
        raise ValueError("prompt must be a string (or a list with one string)")
    return prompt


def _eos_position(prompt: str) -> int:
    """Where the model would stop on its own (answers run long: 300..4000 tokens)."""
    return 300 + int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=4).digest(), "big") % 3700


class Routes:
    def __init__(self, node: SimNode) -> None:
        self.node = node

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200 if self.node.ready else 503, text="" if self.node.ready else "loading")

    async def models(self, _: web.Request) -> web.Response:
        n = self.node
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": n.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": n.model,
                        "max_model_len": n.context_len,
                    }
                ],
            }
        )

    async def server_info(self, _: web.Request) -> web.Response:
        return web.json_response(self.node.server_info())

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        node = self.node
        if not node.ready:
            return _error(503, "The server is not ready yet (loading)")
        injected = await inject(node, request)
        if injected is not None:
            return injected
        try:
            body = await request.json()
            prompt = _chat_prompt(body.get("messages")) if chat else _completion_prompt(body.get("prompt"))
            temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
            max_tokens = body.get("max_completion_tokens") if chat else None
            max_tokens = max_tokens if max_tokens is not None else body.get("max_tokens")
        except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            return _error(400, f"invalid request: {exc}")
        prompt_tokens = count_tokens(prompt)
        room = node.context_len - prompt_tokens
        if max_tokens is None:
            max_tokens = room if chat else 16
        if not isinstance(max_tokens, int) or max_tokens < 1 or max_tokens > room:
            return _error(
                400,
                f"Requested token count exceeds the model's maximum context length of "
                f"{node.context_len} tokens (prompt {prompt_tokens}, max_tokens {max_tokens}).",
            )
        gen_tokens, finish = max_tokens, "length"
        if not body.get("ignore_eos", False) and _eos_position(prompt) < max_tokens:
            gen_tokens, finish = _eos_position(prompt), "stop"
        node.on_request()
        cached = 0
        key = hashlib.blake2b(prompt.encode(), digest_size=16).hexdigest()
        repeated, node.last_prompt_key = key == node.last_prompt_key, key
        if not node.cfg.disable_radix_cache:
            if key in node.prefix_cache:
                cached = prompt_tokens
                node.prefix_cache.move_to_end(key)
            else:  # radix cache: keeps recent prompts while half the KV pool holds them
                node.prefix_cache[key] = prompt_tokens
                node.prefix_cache_tokens += prompt_tokens
                while node.prefix_cache_tokens > node.mem.kv_capacity_tokens // 2 and len(node.prefix_cache) > 1:
                    node.prefix_cache_tokens -= node.prefix_cache.popitem(last=False)[1]
        greedy = temperature == 0.0
        text = TextStream(
            prompt,
            greedy=greedy,
            sample_seed=int(body.get("seed") or node.engine.rng.getrandbits(32)),
            corrupt=node.corrupts_greedy,
        )
        state = StreamState(text, arrival_node_s=node.engine.clock())
        tps = accept_length(prompt_predictability(prompt, repeated=repeated), node.cfg)
        seq = Seq(node.next_rid, prompt_tokens, gen_tokens, tps, cached_tokens=cached, payload=state)
        node.next_rid += 1
        meta = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
            "created": int(time.time()),
            "model": node.model,
        }
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": gen_tokens,
            "total_tokens": prompt_tokens + gen_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        node.engine.submit(seq)
        try:
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return await self._stream(request, seq, meta, chat, finish, usage if include_usage else None)
            pieces = [text_piece async for text_piece, _, _ in self._pieces(state)]
        except (asyncio.CancelledError, ConnectionResetError):
            node.engine.abort(seq)
            raise
        self._account(seq)
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "matched_stop": None, "logprobs": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": "".join(pieces)}
        else:
            choice["text"] = "".join(pieces)
        return web.json_response(
            {**meta, "object": "chat.completion" if chat else "text_completion", "choices": [choice], "usage": usage}
        )

    def _account(self, seq: Seq) -> None:
        if self.node.cfg.speculative:
            self.node.spec_tokens += seq.tokens_per_step
            self.node.spec_requests += 1

    async def _pieces(self, state: StreamState) -> AsyncIterator[tuple[str, bool, float]]:
        """Yields (text, finished, node time of its step) per delivered chunk."""
        while True:
            await state.wake.wait()
            state.wake.clear()
            chunks, state.chunks = state.chunks, []
            for n, fin, node_t in chunks:
                yield state.text.take(n), fin, node_t
                if fin:
                    return

    async def _stream(
        self,
        request: web.Request,
        seq: Seq,
        meta: dict[str, Any],
        chat: bool,
        finish: str,
        usage: dict[str, Any] | None,
    ) -> web.StreamResponse:
        state = seq.payload
        assert isinstance(state, StreamState)  # hung there by the engine with the sequence
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        obj = "chat.completion.chunk" if chat else "text_completion"

        def event(choices: list[dict[str, Any]], node_t: float, use: dict[str, Any] | None = None) -> bytes:
            # the node's clock (engine.py): the load generator measures node time from it
            clock = {"node_t0": round(state.arrival_node_s, 6), "node_t": round(node_t, 6)}
            return (
                b"data: "
                + json.dumps({**meta, "object": obj, "choices": choices, "usage": use, **clock}).encode()
                + b"\n\n"
            )

        first = True
        async for piece, fin, node_t in self._pieces(state):
            if chat:
                delta: dict[str, Any] = {"content": piece}
                if first:
                    delta["role"] = "assistant"
                choice = {"index": 0, "delta": delta, "finish_reason": finish if fin else None, "logprobs": None}
            else:
                choice = {"index": 0, "text": piece, "finish_reason": finish if fin else None, "logprobs": None}
            first = False
            out = event([choice], node_t)
            if fin and usage is not None:
                out += event([], node_t, usage)
            if fin:
                out += b"data: [DONE]\n\n"
            await resp.write(out)
        self._account(seq)
        await resp.write_eof()
        return resp


#: the server's own API key (as `--api-key` of SGLang and vLLM): when set, generation
#: requests and every /v1/ request (/v1/models included, as vLLM does) without
#: `Authorization: Bearer <key>` are refused with 401 and counted in the log.
API_KEY_ENV = "SIMNODE_API_KEY"


def _key_middleware() -> Middleware:
    import hmac
    import os
    import sys

    want = os.environ.get(API_KEY_ENV, "")

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if want and (request.method == "POST" or request.path.startswith("/v1/")):
            got = request.headers.get("Authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {want}".encode()):
                print(f"simnode: refused {request.path}: no valid API key", file=sys.stderr, flush=True)
                return web.json_response({"object": "error", "message": "invalid API key", "code": 401}, status=401)
        return await handler(request)

    return middleware


def build_app(node: SimNode) -> web.Application:
    r = Routes(node)
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[outage_middleware(node), _key_middleware()])
    app.router.add_get("/health", r.health)
    app.router.add_get("/health_generate", r.health)
    app.router.add_get("/v1/models", r.models)
    app.router.add_get("/server_info", r.server_info)
    app.router.add_get("/get_server_info", r.server_info)
    app.router.add_post("/v1/completions", r.completions)
    app.router.add_post("/v1/chat/completions", r.chat)
    return app
