"""A real vLLM server through the project's launcher, load generator and metrics reader."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from campaign.domain.models import EffectiveConfig, FailureClass, WorkloadSpec
from tests.realengine.conftest import VLLM, launch_request, launcher
from tools.engines import VllmSetup
from tools.loadgen.sweep import run_sweep
from tools.server.launch import LaunchFailed, RunningServer

pytestmark = pytest.mark.realengine


def test_serves_our_model(tiny_server: RunningServer, vllm_setup: VllmSetup) -> None:
    assert tiny_server.check() is None
    models = httpx.get(tiny_server.url + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [vllm_setup.model_tiny]


def test_streamed_sweep_and_metrics(tiny_server: RunningServer, vllm_setup: VllmSetup) -> None:
    before = VLLM.read_metrics(tiny_server.url)
    workload = WorkloadSpec(
        name="smoke", concurrency=[1, 4], output_tokens=16, requests_per_level=4, warmup_requests=1, prompt_tokens=32
    )
    result = asyncio.run(
        run_sweep(tiny_server.url, workload, model=vllm_setup.model_tiny, time_scale=1.0, request_timeout_s=120)
    )
    assert [lv.concurrency for lv in result.levels] == [1, 4]
    for level in result.levels:
        assert level.errors == 0, level.error_samples
        assert level.requests == 4 and level.output_tokens > 0
        assert level.output_tokens_per_s > 0 and level.ttft_ms.p50 > 0
    after = VLLM.read_metrics(tiny_server.url)
    produced = sum(lv.output_tokens for lv in result.levels)
    assert (after.generation_tokens or 0) - (before.generation_tokens or 0) >= produced
    assert after.running_requests == 0 and after.spec_accept_length is None  # no speculation configured


def test_a_second_launch_on_a_taken_port_fails_fast(
    tiny_server: RunningServer, vllm_setup: VllmSetup, tmp_path
) -> None:
    req = launch_request(vllm_setup, vllm_setup.model_tiny, tmp_path, EffectiveConfig())
    req = req.model_copy(update={"port": int(tiny_server.url.rsplit(":", 1)[1])})
    t0 = time.monotonic()
    with pytest.raises(LaunchFailed) as info:
        launcher().launch(req)
    assert info.value.failure.failure_class is FailureClass.port_in_use
    assert time.monotonic() - t0 < 5
    assert tiny_server.check() is None  # ours still serves
