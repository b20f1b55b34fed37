"""Correctness gate, the measuring half: greedy outputs of a server (compared by
`campaign.verdict.correctness.compare_outputs`).

A flag that makes a server faster by computing something else is not an improvement;
greedy (temperature 0) completions of the same prompts must match.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from tools.loadgen.sweep import LoadgenError, base_url, probe_model, request_headers

#: requests in flight while collecting greedy outputs.
GREEDY_CONCURRENCY = 8


async def greedy_outputs(
    url: str,
    prompts: list[str],
    max_tokens: int,
    model: str | None = None,
    timeout_s: float = 600,
    api_key: str | None = None,
) -> list[str]:
    """Non-streaming temperature-0 completions, in prompt order (the server's own key, if any)."""
    target = base_url(url) + "/v1/completions"
    semaphore = asyncio.Semaphore(GREEDY_CONCURRENCY)
    headers = request_headers(api_key)
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False, headers=headers) as client:
        name = model or await probe_model(client, url)

        async def one(prompt: str) -> str:
            body = {"model": name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "stream": False}
            async with semaphore:
                try:
                    resp = await client.post(target, content=json.dumps(body))
                except httpx.HTTPError as exc:
                    raise LoadgenError(f"{target}: {type(exc).__name__}: {exc}") from exc
            if resp.status_code != 200:
                raise LoadgenError(f"{target}: HTTP {resp.status_code}: {resp.text[:200]}")
            try:
                return str(resp.json()["choices"][0]["text"])
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise LoadgenError(f"{target}: unexpected completion body: {resp.text[:200]}") from exc

        return list(await asyncio.gather(*(one(p) for p in prompts)))
