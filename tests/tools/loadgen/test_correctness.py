"""Correctness gate: greedy outputs over real HTTP and their comparison."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from campaign.verdict.correctness import compare_outputs
from tools.loadgen.correctness import greedy_outputs
from tools.loadgen.sweep import LoadgenError


def test_greedy_outputs_in_prompt_order_with_temperature_zero() -> None:
    seen: list[dict] = []

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        await asyncio.sleep(0.05 if body["prompt"] == "a" else 0)  # finish out of order
        return web.json_response({"choices": [{"text": body["prompt"].upper() * body["max_tokens"]}]})

    async def models(_r: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def main() -> list[str]:
        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            return await greedy_outputs(f"http://127.0.0.1:{port}", ["a", "b", "c"], max_tokens=2)
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == ["AA", "BB", "CC"]
    assert all(b["temperature"] == 0.0 and b["stream"] is False and b["model"] == "m" for b in seen)


def test_greedy_outputs_unreachable() -> None:
    with pytest.raises(LoadgenError):
        asyncio.run(greedy_outputs("http://127.0.0.1:9", ["a"], 4, model="m"))


def test_compare_outputs() -> None:
    same = compare_outputs(["x", "y"], ["x", "y"], tolerance=0.0)
    assert same.passed and same.mismatches == 0 and same.prompts == 2
    diff = compare_outputs(["hello world", "y", "z", "w"], ["hello there", "y", "z", "w"], tolerance=0.0)
    assert not diff.passed and diff.mismatches == 1 and "prompt 0: differs at char 6" in diff.examples[0]
    assert compare_outputs(["hello world", "y", "z", "w"], ["hello there", "y", "z", "w"], tolerance=0.25).passed
    with pytest.raises(ValueError):
        compare_outputs(["a"], [], 0.0)
