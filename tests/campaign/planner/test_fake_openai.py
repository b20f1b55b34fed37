"""The scripted server itself, through the official client."""

from __future__ import annotations

import openai
import pytest

from tests.fake_openai import FakeOpenAI, answer


def test_models_and_an_exhausted_script(server: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=3)
    assert [m.id for m in client.models.list()] == ["fake-model"]
    server.script(answer({"ok": True}))
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == '{"ok": true}' and reply.usage and reply.usage.total_tokens == 160
    with pytest.raises(openai.InternalServerError, match="script exhausted"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert [r.path for r in server.requests] == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
    assert server.requests[-1].prompt_text() == "again"  # x-should-retry: false stopped the retries
