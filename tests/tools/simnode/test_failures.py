"""Failure modes of the real node process: log line, moment, exit code; CUDA 13 lifts
the CUDA-bound ones; the broken-kernel combination corrupts greedy outputs."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

BASE = ("--cuda-graph-max-bs", "128", "--mem-fraction-static", "0.88")


@pytest.mark.parametrize(
    "args,env,needle",
    [
        (("--enable-flashinfer-allreduce-fusion",), {}, "unsupported arch sm_120"),
        (("--enable-torch-symm-mem",), {}, "not in torch symmetric memory's arch table"),
        ((), {"NCCL_ALGO": "Tree"}, "incompatible with CUDA graphs"),
        (("--mem-fraction-static", "0.98"), {}, "CUDA out of memory"),
        (("--cuda-graph-max-bs", "2048"), {}, "Capture cuda graph failed"),
    ],
    ids=["flashinfer-fusion", "symm-mem", "nccl-tree", "mem-fraction", "graph-too-big"],
)
def test_start_failures_exit_fast_and_never_healthy(launch, args, env, needle):
    node = launch(*BASE, *args, env=env, time_scale=50.0)
    assert node.wait_healthy(timeout=20) is False
    code = node.proc.wait(10)
    elapsed = time.monotonic() - node.started
    log = node.log()
    assert code == 1, log
    assert needle in log
    assert "Received sigquit from a child process" in log
    assert "fired up" not in log
    assert elapsed < 3.0  # < 2 s of node startup at scale 50, plus interpreter start


def test_capture_failures_happen_at_graph_capture(launch):
    node = launch(*BASE, env={"NCCL_ALGO": "Tree"}, time_scale=50.0)
    node.proc.wait(20)
    log = node.log().splitlines()
    begin = next(i for i, ln in enumerate(log) if "Capture cuda graph begin" in ln)
    assert any("NCCL" in ln for ln in log[begin:])
    assert not any("NCCL" in ln for ln in log[:begin] if "server_args" not in ln)


@pytest.mark.parametrize(
    "args,env",
    [
        (("--enable-flashinfer-allreduce-fusion",), {}),
        (("--enable-torch-symm-mem",), {}),
        ((), {"NCCL_ALGO": "Tree"}),
    ],
    ids=["flashinfer-fusion", "symm-mem", "nccl-tree"],
)
def test_cuda13_removes_cuda_bound_failures(launch, args, env):
    node = launch(*BASE, *args, env=env, cuda="13.0")
    assert node.wait_healthy()
    info = httpx.get(node.url + "/server_info").json()
    assert info["cuda"] == "13.0"


def test_expert_parallel_flashinfer_asserts_then_ooms_under_load(launch):
    node = launch(*BASE, "--ep-size", "8", "--moe-a2a-backend", "flashinfer", time_scale=20.0)
    assert node.wait_healthy()
    assert "AssertionError: expert location metadata" in node.log()

    async def stream() -> str:
        async with httpx.AsyncClient(timeout=30) as client:
            body = {"prompt": "a b c", "max_tokens": 2000, "ignore_eos": True, "stream": True}
            async with client.stream("POST", node.url + "/v1/completions", json=body) as r:
                text = ""
                async for chunk in r.aiter_text():
                    text += chunk
                return text

    with pytest.raises(httpx.HTTPError):  # the stream breaks mid-flight
        asyncio.run(stream())
    assert node.proc.wait(10) == -9
    assert "torch.OutOfMemoryError: CUDA out of memory" in node.log()


def _greedy(url: str, prompts: list[str]) -> list[str]:
    return [
        httpx.post(
            url + "/v1/completions", json={"prompt": p, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
        ).json()["choices"][0]["text"]
        for p in prompts
    ]


def test_greedy_outputs_deterministic_and_broken_kernel_corrupts_some(launch):
    prompts = [f"question {i}: why is the sky blue" for i in range(12)]
    a, b = launch(*BASE), launch(*BASE, "--kv-cache-dtype", "fp8_e4m3")
    bad = launch(*BASE, "--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "triton")
    for n in (a, b, bad):
        assert n.wait_healthy()
    ref = _greedy(a.url, prompts)
    assert _greedy(b.url, prompts) == ref  # fp8 KV alone is correct
    assert _greedy(a.url, prompts) == ref
    broken = _greedy(bad.url, prompts)
    differ = sum(x != y for x, y in zip(ref, broken))
    assert 1 <= differ < len(prompts)
    sampled = httpx.post(
        a.url + "/v1/completions", json={"prompt": prompts[0], "max_tokens": 40, "temperature": 1.0, "ignore_eos": True}
    ).json()
    assert sampled["choices"][0]["text"] != ref[0]


def test_port_in_use_exits_with_bind_error(launch):
    first = launch(*BASE)
    assert first.wait_healthy()
    port = first.url.rsplit(":", 1)[1]
    second = launch(*BASE, "--port", port)  # argparse: the last --port wins
    assert second.proc.wait(20) == 1
    assert "address already in use" in second.log()
