"""tools.loadgen.sweep against real aiohttp.web servers on 127.0.0.1 with known timing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from campaign.domain.errors import UserError
from campaign.domain.models import WorkloadSpec
from tools.loadgen.sweep import LoadgenError, LoadSweep, probe_time_scale, run_sweep

# the timing checks compare measured latencies with the server's known timing to a few ms
pytestmark = pytest.mark.exclusive

STATE = web.AppKey("state", dict)


def sse(event: dict | str) -> bytes:
    return b"data: " + (event.encode() if isinstance(event, str) else json.dumps(event).encode()) + b"\n\n"


def make_app(
    first_token_s: float = 0.05,
    interval_s: float = 0.01,
    usage: bool = True,
    tokens_per_chunk: int = 1,
    server_info: dict | None = None,
    misbehave: Callable[[int], str] = lambda n: "",
    model: str = "test-model",
) -> web.Application:
    """A streaming completions server; ``misbehave(n)`` -> "500", "break", "hang" or ""."""
    state: dict = {"n": 0, "bodies": [], "in_flight": 0, "peak": 0, "peers": set(), "auth": set()}

    async def completions(request: web.Request) -> web.StreamResponse:
        state["in_flight"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        try:
            return await stream(request)
        finally:
            state["in_flight"] -= 1

    async def stream(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state["bodies"].append(body)
        state["auth"].add(request.headers.get("Authorization"))
        state["peers"].add(request.transport.get_extra_info("peername") if request.transport else None)
        state["n"] += 1
        mode = misbehave(state["n"])
        if mode == "500":
            return web.json_response({"error": "boom"}, status=500)
        if body.get("model") != model:
            return web.json_response({"error": f"unknown model {body.get('model')}"}, status=404)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chat = request.path.endswith("chat/completions")
        tokens = int(body["max_tokens"])
        await asyncio.sleep(first_token_s)
        if mode == "hang":
            await asyncio.sleep(1.5)
        sent = 0
        while sent < tokens:
            n = min(tokens_per_chunk, tokens - sent)
            text = "x" * n
            choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
            await resp.write(sse({"choices": [choice], "usage": None}))
            sent += n
            if mode == "break" and sent >= 2:
                request.transport.close()
                return resp
            if sent < tokens:
                await asyncio.sleep(interval_s * n)
        if usage:
            await resp.write(sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": tokens}}))
        await resp.write(sse("[DONE]"))
        await resp.write_eof()
        return resp

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": model}]})

    async def info(_request: web.Request) -> web.Response:
        return web.json_response(server_info)

    app = web.Application()
    app[STATE] = state
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    if server_info is not None:
        app.router.add_get("/get_server_info", info)
    return app


def with_server(app: web.Application, body: Callable[[str], Awaitable[object]]) -> object:
    async def main() -> object:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            return await body(f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def workload(**kw: object) -> WorkloadSpec:
    base = {
        "name": "t",
        "concurrency": [1],
        "output_tokens": 8,
        "requests_per_level": 2,
        "warmup_requests": 0,
        "prompt_tokens": 16,
    }
    return WorkloadSpec(**(base | kw))


@pytest.mark.parametrize("http_client", ["asyncio", "aiohttp", "httpx"])
def test_levels_follow_the_server_timing(http_client: str) -> None:
    app = make_app(first_token_s=0.06, interval_s=0.01)
    spec = workload(concurrency=[1, 2], requests_per_level="2*C", warmup_requests=1)
    result = with_server(app, lambda url: run_sweep(url, spec, http_client=http_client))
    assert result.model == "test-model" and result.time_scale == 1.0
    assert [lv.requests for lv in result.levels] == [2, 4]
    assert app[STATE]["n"] == 2 + 4 + 2  # warm-ups are sent but not counted
    for lv in result.levels:
        assert lv.errors == 0 and lv.token_source == "usage"
        assert lv.output_tokens == 8 * lv.requests and lv.input_tokens == 7 * lv.requests
        assert 55 <= lv.ttft_ms.p50 <= 110
        assert 8 <= lv.itl_ms.p50 <= 20 and 8 <= lv.tpot_ms.p50 <= 20
        assert lv.e2e_ms.p50 == pytest.approx(lv.ttft_ms.p50 + 7 * lv.tpot_ms.p50, abs=3)
        assert lv.output_tokens_per_s == pytest.approx(lv.output_tokens / lv.duration_s)
        assert lv.requests_per_s == pytest.approx(lv.requests / lv.duration_s)
        assert lv.ttft_ms.p50 <= lv.ttft_ms.p90 <= lv.ttft_ms.p99
    # two requests in flight finish a level of 4 in about the time one does 2
    assert result.levels[1].output_tokens_per_s > 1.5 * result.levels[0].output_tokens_per_s
    body = app[STATE]["bodies"][0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True} and body["ignore_eos"] is True


@pytest.mark.parametrize("http_client", ["asyncio", "aiohttp", "httpx"])
def test_a_server_gets_its_own_key_and_never_the_controllers(http_client: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-controller-" + "c" * 24)
    app = make_app()
    with_server(app, lambda url: run_sweep(url, workload(), http_client=http_client))
    assert app[STATE]["auth"] == {None}  # undeclared: no credential at all
    app = make_app()
    with_server(app, lambda url: run_sweep(url, workload(), http_client=http_client, api_key="server-own-key"))
    assert app[STATE]["auth"] == {"Bearer server-own-key"}


def test_chunks_are_counted_without_usage_and_multi_token_chunks_are_one_itl_sample() -> None:
    app = make_app(first_token_s=0.02, interval_s=0.01, usage=False, tokens_per_chunk=2)
    result = with_server(app, lambda url: run_sweep(url, workload(output_tokens=8)))
    lv = result.levels[0]
    assert lv.token_source == "chunks"
    assert lv.output_tokens == 2 * 4  # 4 chunks per request counted, usage absent
    assert 16 <= lv.itl_ms.p50 <= 30  # one sample per chunk gap (2 tokens x 10 ms)

    app = make_app(first_token_s=0.02, interval_s=0.01, usage=True, tokens_per_chunk=2)
    lv = with_server(app, lambda url: run_sweep(url, workload(output_tokens=8))).levels[0]
    assert lv.token_source == "usage" and lv.output_tokens == 2 * 8
    assert 16 <= lv.itl_ms.p50 <= 30 and 7 <= lv.tpot_ms.p50 <= 15  # TPOT is per token


@pytest.mark.parametrize("http_client", ["asyncio", "aiohttp", "httpx"])
def test_http_errors_and_broken_streams_are_counted(http_client: str) -> None:
    app = make_app(first_token_s=0.01, interval_s=0.005, misbehave=lambda n: {1: "500", 2: "break"}.get(n % 4, ""))
    spec = workload(concurrency=[2], requests_per_level=8)
    lv = with_server(app, lambda url: run_sweep(url, spec, http_client=http_client)).levels[0]
    assert lv.requests == 8 and lv.errors == 4
    assert lv.output_tokens == 4 * 8  # only the good requests count
    assert any(s.startswith("HTTP 500") for s in lv.error_samples)
    assert any(s.startswith("broken stream") for s in lv.error_samples)
    assert len(lv.error_samples) <= 5


def test_a_hanging_request_is_a_timeout() -> None:
    app = make_app(first_token_s=0.01, misbehave=lambda n: "hang" if n == 1 else "")
    lv = with_server(app, lambda url: run_sweep(url, workload(requests_per_level=2), request_timeout_s=0.5)).levels[0]
    assert lv.errors == 1 and lv.error_samples[0].startswith("timeout")


def test_time_scale_from_server_info_converts_to_node_time() -> None:
    app = make_app(first_token_s=0.02, interval_s=0.01, server_info={"time_scale": 10.0})
    result = with_server(app, lambda url: run_sweep(url, workload(output_tokens=6)))
    lv = result.levels[0]
    assert result.time_scale == 10.0
    assert 80 <= lv.tpot_ms.p50 <= 200  # 10 ms wall per token -> 100 ms node
    assert lv.output_tokens_per_s == pytest.approx(lv.output_tokens / lv.duration_s)
    assert lv.output_tokens_per_s < 10  # about 600 wall tok/s / 10 ... per single stream ~8


def test_time_scale_absent_is_one_and_model_argument_wins() -> None:
    app = make_app(model="named")

    async def body(url: str) -> tuple[float, object]:
        import httpx

        async with httpx.AsyncClient() as client:
            scale = await probe_time_scale(client, url)
        return scale, await run_sweep(url + "/v1", workload(requests_per_level=1), model="named", time_scale=2.0)

    scale, result = with_server(app, body)
    assert scale == 1.0
    assert result.model == "named" and result.time_scale == 2.0 and result.levels[0].errors == 0


def test_chat_endpoint_and_prompt_provenance() -> None:
    app = make_app()
    spec = workload(endpoint="chat", prompts="diverse", requests_per_level=3)
    result = with_server(app, lambda url: run_sweep(url, spec))
    assert result.levels[0].errors == 0 and result.levels[0].output_tokens == 24
    bodies = app[STATE]["bodies"]
    assert all(b["messages"][0]["role"] == "user" for b in bodies)
    assert len({b["messages"][0]["content"] for b in bodies}) == 3  # diverse: distinct prompts
    assert len(result.prompt_set_hash) == 16


def test_unreachable_url_raises_loadgen_error() -> None:
    with pytest.raises(LoadgenError, match="cannot reach"):
        LoadSweep("http://127.0.0.1:9", workload()).run()


def test_exactly_c_requests_in_flight() -> None:
    app = make_app(first_token_s=0.03, interval_s=0.005)
    lv = with_server(app, lambda url: run_sweep(url, workload(concurrency=[3], requests_per_level=10))).levels[0]
    assert lv.errors == 0 and lv.requests == 10 and app[STATE]["peak"] == 3


@pytest.mark.parametrize("http_client", ["asyncio", "aiohttp"])
def test_a_level_runs_over_exactly_c_keep_alive_connections(http_client: str) -> None:
    app = make_app(first_token_s=0.01, interval_s=0.002)
    spec = workload(concurrency=[3], requests_per_level=12, output_tokens=4)
    lv = with_server(app, lambda url: run_sweep(url, spec, http_client=http_client)).levels[0]
    assert lv.errors == 0 and app[STATE]["n"] == 12
    assert len(app[STATE]["peers"]) == 3  # 12 requests over 3 connections (pre-opening: test_loadgen_conn)


def test_unknown_http_client_is_a_user_error() -> None:
    with pytest.raises(UserError, match="http_client"):
        with_server(make_app(), lambda url: run_sweep(url, workload(), http_client="curl"))  # type: ignore[arg-type]


def _prompts_sent(app: web.Application) -> list[str]:
    return [b["prompt"] for b in app[STATE]["bodies"]]


def test_no_prompt_is_served_twice_in_a_sweep_while_the_set_has_unused_ones() -> None:
    """A later level must not re-send an earlier level's prompts: a server with a prefix
    cache (SGLang's radix cache) would skip their prefill and the level would read fast."""
    app = make_app(first_token_s=0.001, interval_s=0.001)
    spec = workload(prompts="diverse", concurrency=[1, 2, 5], requests_per_level="C * ceil(6 / C)", warmup_requests=1)
    with_server(app, lambda url: run_sweep(url, spec))
    sent = _prompts_sent(app)
    assert len(sent) == 3 + 6 + 6 + 10  # a warm-up and the measured requests of each level
    assert len(set(sent)) == len(sent)


def test_a_sweep_longer_than_its_prompt_file_uses_every_prompt_before_any_repeats(tmp_path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(5)))
    app = make_app(first_token_s=0.001, interval_s=0.001)
    spec = workload(prompts=str(path), concurrency=[1, 2], requests_per_level=4)
    with_server(app, lambda url: run_sweep(url, spec))
    sent = _prompts_sent(app)
    assert sent[:4] == ["prompt 0", "prompt 1", "prompt 2", "prompt 3"]
    assert sorted(sent[4:]) == ["prompt 0", "prompt 1", "prompt 2", "prompt 4"]  # 4 first, then round again


def test_a_diverse_sweep_longer_than_the_default_pool_still_repeats_no_prompt() -> None:
    """512 generated prompts cover the default sweep (509 requests); a user's "2*C" up to
    C=250 sends hundreds more, and the last levels would re-serve the first ones."""
    app = make_app(first_token_s=0.001, interval_s=0.001)
    spec = workload(
        prompts="diverse", concurrency=[50, 250], requests_per_level="2*C", output_tokens=1, warmup_requests=2
    )
    with_server(app, lambda url: run_sweep(url, spec))
    sent = _prompts_sent(app)
    assert len(sent) == 2 + 100 + 2 + 500 and len(set(sent)) == len(sent)
