"""Load sweeps against an OpenAI-compatible streaming server (SSE).

Probes (``/server_info``, ``/v1/models``) use httpx.  The streaming hot path
(``http_client``) is by default ``"asyncio"``: one asyncio Protocol per keep-alive
connection that stamps and parses SSE events in ``data_received`` (``tools.loadgen.conn``);
``"aiohttp"`` and ``"httpx"`` remain selectable (``tools.loadgen.stream``).  The three
share one SSE parser (``SseTimer``) and produce the same figures.

Each concurrency level C runs ``warmup_requests`` uncounted requests, then N measured
requests (``requests_per_level`` evaluated at C) with exactly C in flight: C workers pull
the next request index until N are sent.  Prompts are handed out in the set's order by one
cursor that runs on across the sweep's levels (warm-ups included), and a generated
"diverse" set is as long as the sweep, so no prompt is sent twice in a sweep (a JSONL
file shorter than the sweep goes round again): with a prefix cache (SGLang's radix cache,
vLLM's prefix caching) a re-sent prompt skips its prefill, and a level that re-serves
the prompts of the levels before it reads up to 47% fast (measured on the simulated
node).  Every request streams with
``stream_options: {include_usage: true}`` and ``ignore_eos`` so it yields exactly
``output_tokens`` tokens.

Connections: before each level's warm-up and again before its measured requests, C
keep-alive connections are opened (``asyncio``: one per slot; ``aiohttp``: C concurrent
GETs fill its pool), so TCP connect is not in TTFT.  SGLang's ``bench_serving`` opens a
new session, hence a new connection, per request (connect inside every TTFT); vLLM's
``bench serve`` shares a keep-alive pool (connect inside the TTFT of each connection's
first request).  A connection the server closed is reopened inside the timing of the
request that needs it, as in vLLM.

Per request (wall clock ``time.perf_counter``, ``st`` = just before the request is sent;
for ``asyncio`` just before its bytes are written to the socket):
- TTFT = arrival of the first SSE event whose text/delta is non-empty - st (``asyncio``
  stamps arrival when the event loop hands the bytes to the connection, the other
  clients when the request's coroutine resumes).
- E2E  = arrival of the end of the stream (``data: [DONE]``) - st.  SGLang stops the clock
  at its last received line too; vLLM at the last JSON event - one SSE line earlier.
- ITL samples = gaps between consecutive content-bearing SSE events.  As in SGLang and
  vLLM, one event is one sample even when it carries several tokens (speculative
  decoding): ITL is the chunk cadence, TPOT the per-token rate.
- output tokens = ``usage.completion_tokens`` of the streamed usage block
  (``token_source="usage"``); a server that streams none gets its content events
  counted instead (``token_source="chunks"``).
- TPOT = (E2E - TTFT) / (output_tokens - 1), only for requests with > 1 token.
Per level (failed requests contribute nothing but their error):
- duration = end of the last measured request - dispatch of the first.
- output tok/s = total output tokens / duration; requests/s = completed / duration
  (both exactly as ``bench_serving`` and ``vllm bench serve``).
- TTFT/ITL/TPOT/E2E: mean and linear-interpolated p50/p90/p99 over the samples.
- errors: HTTP status != 200, broken streams (connection lost, no ``[DONE]``, bad
  JSON, no content), timeouts; a few distinct messages are kept as samples.
Node time: a simulated node runs K node seconds per wall second (``time_scale`` from
``/server_info``, 1.0 when absent), so durations are multiplied by K and rates divided.
The bundled simulated node also stamps every event with its own clock (``node_t0``: the
request's arrival, ``node_t``: the event's step; tools/simnode/engine.py); when every
measured request carries it, times and the level's duration come from that clock, so a
host stall, which would count K times over in wall time, does not move the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Literal

import httpx

from campaign.domain.errors import UserError
from campaign.domain.models import LevelResult, SweepResult, WorkloadSpec
from campaign.domain.prompts import PromptSet, build_prompt_set
from campaign.domain.work import MEASUREMENT_PROTOCOL
from tools.loadgen.conn import SlotConnections
from tools.loadgen.stats import RequestOutcome, requests_for_level, summarize_level
from tools.loadgen.stream import aiohttp_session, httpx_clients, preopen_aiohttp, stream_aiohttp, stream_httpx

PROBE_TIMEOUT_S = 10.0


class LoadgenError(RuntimeError):
    """The server cannot be reached or does not speak the expected API."""


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One finished request (or a level boundary) for progress displays."""

    phase: str  # "warmup", "measure" or "level_done"
    concurrency: int
    level_index: int
    levels: int
    completed: int
    total: int
    errors: int
    level: LevelResult | None = None


async def _nothing(_count: int) -> None:
    return None


def base_url(url: str) -> str:
    """``http://h:p``, ``http://h:p/`` and ``http://h:p/v1`` all name the same server."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def request_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request: the server's own key only when one is given
    (`server.api_key_env`), never a credential of the controller's environment."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


async def _get_json(client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """JSON of a GET, None on a non-200 or non-JSON answer; LoadgenError if unreachable."""
    try:
        resp = await client.get(url, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise LoadgenError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        return None
    try:
        data = resp.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


async def probe_time_scale(client: httpx.AsyncClient, url: str) -> float:
    for path in ("/server_info", "/get_server_info"):
        info = await _get_json(client, base_url(url) + path)
        if info is not None:
            value = info.get("time_scale", 1.0)
            return float(value) if isinstance(value, (int, float)) and value > 0 else 1.0
    return 1.0


async def probe_model(client: httpx.AsyncClient, url: str) -> str:
    data = await _get_json(client, base_url(url) + "/v1/models")
    models = (data or {}).get("data") or []
    if not models or not isinstance(models[0], dict) or not models[0].get("id"):
        raise LoadgenError(f"{base_url(url)}/v1/models lists no model (pass the model name explicitly)")
    return str(models[0]["id"])


def request_body(prompt: str, model: str, workload: WorkloadSpec, *, stream: bool = True) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": workload.output_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    if workload.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


async def _run_batch(
    send: Callable[[int, bytes], Awaitable[RequestOutcome]],
    bodies: Callable[[int], bytes],
    count: int,
    concurrency: int,
    timeout_s: float,
    on_done: Callable[[RequestOutcome], None],
) -> list[RequestOutcome]:
    """``count`` requests with exactly ``min(concurrency, count)`` in flight."""
    results: list[RequestOutcome | None] = [None] * count
    next_index = 0

    async def worker(slot: int) -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            try:
                async with asyncio.timeout(timeout_s):
                    outcome = await send(slot, bodies(index))
            except TimeoutError:
                outcome = RequestOutcome(ok=False, error=f"timeout: no complete response within {timeout_s:g}s")
            results[index] = outcome
            on_done(outcome)

    await asyncio.gather(*(worker(slot) for slot in range(min(concurrency, count))))
    return [r for r in results if r is not None]


async def run_sweep(
    url: str,
    workload: WorkloadSpec,
    *,
    model: str | None = None,
    time_scale: float | None = None,
    progress: Callable[[ProgressEvent], None] | None = None,
    request_timeout_s: float = 600,
    max_connections: int | None = None,
    http_client: Literal["asyncio", "aiohttp", "httpx"] = "asyncio",
    api_key: str | None = None,
) -> SweepResult:
    """Run every concurrency level of ``workload`` against ``url``; figures in node time.

    ``max_connections`` sizes the aiohttp/httpx pools; ``asyncio`` holds one connection
    per in-flight slot of the current level.
    """
    if not workload.concurrency or any(c < 1 for c in workload.concurrency):
        raise UserError(f"workload {workload.name}: concurrency: {workload.concurrency} (fix: a list of integers >= 1)")
    counts = [requests_for_level(workload.requests_per_level, c) for c in workload.concurrency]
    prompt_set: PromptSet = build_prompt_set(workload)
    chat = workload.endpoint == "chat"
    target = base_url(url) + ("/v1/chat/completions" if chat else "/v1/completions")
    connections = max_connections or max(workload.concurrency)
    emit = progress or (lambda _event: None)
    headers = request_headers(api_key)
    async with contextlib.AsyncExitStack() as stack:
        probe = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, headers=headers))
        scale = time_scale if time_scale is not None else await probe_time_scale(probe, url)
        model_name = model or await probe_model(probe, url)
        preopen: Callable[[int], Awaitable[None]] = _nothing
        if http_client == "httpx":
            clients = [await stack.enter_async_context(c) for c in httpx_clients(connections, request_timeout_s)]

            async def send(slot: int, body: bytes) -> RequestOutcome:
                return await stream_httpx(clients[slot % len(clients)], target, body, headers, chat)
        elif http_client == "aiohttp":
            session = await stack.enter_async_context(aiohttp_session(connections, request_timeout_s))

            async def send(slot: int, body: bytes) -> RequestOutcome:
                return await stream_aiohttp(session, target, body, headers, chat)

            async def fill_pool(count: int) -> None:
                await preopen_aiohttp(session, base_url(url) + "/v1/models", count)

            preopen = fill_pool
        elif http_client == "asyncio":
            pool = SlotConnections(target, headers, connect_timeout_s=min(request_timeout_s, 30.0))
            stack.callback(pool.close)

            async def send(slot: int, body: bytes) -> RequestOutcome:
                return await pool.send(slot, body, chat)

            preopen = pool.ensure
        else:
            raise UserError(f"http_client: {http_client!r} (fix: asyncio, aiohttp or httpx)")

        cache: dict[int, bytes] = {}
        cursor = 0  # prompts the sweep has handed out so far, over all its levels

        def bodies_from(start: int) -> Callable[[int], bytes]:
            def body_for(index: int) -> bytes:
                key = (start + index) % len(prompt_set.prompts)
                if key not in cache:
                    cache[key] = request_body(prompt_set.prompts[key], model_name, workload)
                return cache[key]

            return body_for

        levels: list[LevelResult] = []
        for level_index, (concurrency, count) in enumerate(zip(workload.concurrency, counts)):
            tally = {"done": 0, "errors": 0}

            def counter(phase: str, total: int) -> Callable[[RequestOutcome], None]:
                def on_done(outcome: RequestOutcome) -> None:
                    tally["done"] += 1
                    tally["errors"] += 0 if outcome.ok else 1
                    emit(
                        ProgressEvent(
                            phase, concurrency, level_index, len(counts), tally["done"], total, tally["errors"]
                        )
                    )

                return on_done

            await preopen(concurrency)
            if workload.warmup_requests > 0:
                warm = workload.warmup_requests
                await _run_batch(
                    send, bodies_from(cursor), warm, concurrency, request_timeout_s, counter("warmup", warm)
                )
                cursor += warm
                tally.update(done=0, errors=0)
                await preopen(concurrency)  # reopen what the server closed during the warm-up
            started = perf_counter()
            outcomes = await _run_batch(
                send, bodies_from(cursor), count, concurrency, request_timeout_s, counter("measure", count)
            )
            cursor += count
            level = summarize_level(concurrency, outcomes, perf_counter() - started, scale)
            levels.append(level)
            emit(ProgressEvent("level_done", concurrency, level_index, len(counts), count, count, level.errors, level))
    return SweepResult(
        url=url,
        model=model_name,
        workload=workload,
        prompt_set_hash=prompt_set.hash,
        protocol=MEASUREMENT_PROTOCOL,
        time_scale=scale,
        source="campaign",
        levels=levels,
    )


class LoadSweep:
    """Synchronous wrapper: ``LoadSweep(url, workload).run() -> SweepResult``."""

    def __init__(self, url: str, workload: WorkloadSpec, **options: Any) -> None:
        self.url = url
        self.workload = workload
        self.options = options

    def run(self) -> SweepResult:
        return asyncio.run(run_sweep(self.url, self.workload, **self.options))
