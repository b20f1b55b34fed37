"""Launch failures of a real vLLM, classified from its own log in seconds, not after a
health timeout."""

from __future__ import annotations

import time

import pytest

from campaign.domain.models import EffectiveConfig, FailureClass
from tests.realengine.conftest import launch_request, launcher
from tools.engines import VllmSetup
from tools.server.launch import LaunchFailed

pytestmark = pytest.mark.realengine


def _fail(setup: VllmSetup, tmp_path, flags: dict) -> tuple[LaunchFailed, float]:
    req = launch_request(setup, setup.model_tiny, tmp_path, EffectiveConfig(flags=flags), timeout_s=240)
    t0 = time.monotonic()
    with pytest.raises(LaunchFailed) as info:
        launcher().launch(req)
    return info.value, time.monotonic() - t0


def test_bad_flag_value_is_bad_flag_in_seconds(vllm_setup: VllmSetup, tmp_path) -> None:
    exc, took = _fail(vllm_setup, tmp_path, {"max-num-seqs": "many"})
    assert exc.failure.failure_class is FailureClass.bad_flag
    assert exc.failure.exit_code == 2
    assert any("argument --max-num-seqs: invalid int value: 'many'" in ev for ev in exc.failure.evidence)
    assert took < 60


def test_too_little_kv_cache_is_oom(vllm_setup: VllmSetup, tmp_path) -> None:
    exc, took = _fail(vllm_setup, tmp_path, {"num-gpu-blocks-override": 4, "enforce-eager": True})
    assert exc.failure.failure_class is FailureClass.oom, exc.failure.summary
    assert any("larger than the available KV cache memory" in ev for ev in exc.failure.evidence)
    assert took < 180
