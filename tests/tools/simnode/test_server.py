"""The simulated node over real HTTP on 127.0.0.1: endpoints, SSE framing, server_info."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

from tests.tools.simnode.conftest import REPO

BASE = ("--cuda-graph-max-bs", "128", "--mem-fraction-static", "0.88")


def sse_events(text: str) -> list[str]:
    assert text.endswith("\n\n")
    return [block[len("data: ") :] for block in text.strip().split("\n\n")]


def test_health_models_completions_chat_and_server_info(launch):
    node = launch(*BASE, time_scale=100.0)
    first = None
    for _ in range(50):
        try:
            first = httpx.get(node.url + "/health").status_code
            break
        except httpx.ConnectError:
            time.sleep(0.02)
    assert first == 503  # still loading (60 node seconds)
    assert node.wait_healthy()
    assert "The server is fired up and ready to roll!" in node.log()
    models = httpx.get(node.url + "/v1/models").json()
    assert models["data"][0]["id"] == "moonshotai/Kimi-K2-Instruct"

    body = {
        "prompt": "tell me a story",
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    r = httpx.post(node.url + "/v1/completions", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    streamed = "".join(c["choices"][0]["text"] for c in chunks[:-1])
    assert len(streamed.split()) == 12

    plain = httpx.post(node.url + "/v1/completions", json={**body, "stream": False}).json()
    assert plain["choices"][0]["text"] == streamed  # greedy: a function of the prompt
    assert plain["usage"]["prompt_tokens"] == 4

    chat = httpx.post(
        node.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0, "stream": True},
    ).text
    chat_chunks = [json.loads(e) for e in sse_events(chat)[:-1]]
    assert chat_chunks[0]["object"] == "chat.completion.chunk"
    assert chat_chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chat_chunks[-1]["choices"][0]["finish_reason"] == "length"

    info = httpx.get(node.url + "/get_server_info").json()
    for key in (
        "engine",
        "model",
        "profile",
        "cuda",
        "time_scale",
        "flags",
        "env",
        "spec_accept_length",
        "kv_capacity_tokens",
        "max_running_requests",
        "fingerprint",
    ):
        assert key in info
    assert info["time_scale"] == 100.0 and info["flags"]["cuda_graph_max_bs"] == 128
    assert info["fingerprint"]["arch"] == "sm_120" and info["spec_accept_length"] is None
    assert httpx.get(node.url + "/server_info").json()["kv_capacity_tokens"] == info["kv_capacity_tokens"]


def test_stream_interval_groups_tokens_and_bad_requests_get_400(launch):
    node = launch(*BASE, "--stream-interval", "4", time_scale=5.0)
    assert node.wait_healthy(timeout=60)
    r = httpx.post(
        node.url + "/v1/completions",
        json={"prompt": "x y", "max_tokens": 12, "temperature": 0, "stream": True, "ignore_eos": True},
        timeout=30,
    )
    texts = [json.loads(e)["choices"][0]["text"] for e in sse_events(r.text)[:-1]]
    assert [len(t.split()) for t in texts] == [1, 4, 4, 3]
    bad = httpx.post(node.url + "/v1/completions", json={"prompt": "x", "max_tokens": 10**7})
    assert bad.status_code == 400


def test_env_and_flags_reported(launch):
    node = launch(
        *BASE,
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "16",
        env={"NCCL_MAX_NCHANNELS": "4"},
    )
    assert node.wait_healthy()
    info = httpx.get(node.url + "/server_info").json()
    assert info["env"] == {"NCCL_MAX_NCHANNELS": "4"}
    assert 1.3 < info["spec_accept_length"] < 2.5
    assert info["flags"]["speculative_num_draft_tokens"] == 16


def test_unknown_flag_is_a_usage_error():
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tools.simnode", "--port", "1", "--no-such-flag"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "unrecognized arguments: --no-such-flag" in out.stderr
    assert time.monotonic() - t0 < 10


def test_fingerprint_command():
    out = subprocess.run(
        [sys.executable, "-m", "tools.simnode", "fingerprint", "--profile", "rtx6000bw-pcie-8x", "--cuda", "13.0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    fp = json.loads(out.stdout)
    assert fp["gpu"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition" and fp["gpu_count"] == 8
    assert fp["cuda"] == "13.0" and fp["interconnect"] == "pcie5" and fp["engine"] == "sglang-sim"
    assert fp["extra"]["torch"].endswith("cu130")
