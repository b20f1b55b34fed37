"""Real vLLM on this CPU: every test here needs `scripts/setup_vllm_cpu.sh` to have run
(CI runs it first); without its env file they are skipped with the reason."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaign.domain.models import EffectiveConfig
from tests.needs import missing
from tools.engines import VllmSetup, engine_profile, read_vllm_setup
from tools.engines.launch_spec import build_launch
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchRequest, RunningServer, ServerLauncher

REPO = Path(__file__).resolve().parents[2]
VLLM = engine_profile("vllm")
_ports = itertools.count(18400 + (os.getpid() % 200) * 5)


@pytest.fixture(scope="session")
def vllm_setup() -> VllmSetup:
    setup = read_vllm_setup(REPO)
    if setup is None:
        missing(
            "vLLM CPU is not set up here (.campaign/vllm.env missing or stale): "
            "run `bash scripts/setup_vllm_cpu.sh` first"
        )
    return setup


def launch_request(
    setup: VllmSetup, model: str, log_dir: Path, config: EffectiveConfig, *, timeout_s: float = 300
) -> LaunchRequest:
    """The engine's own launch form for a named interpreter (`python -m vllm.entrypoints.cli.main
    serve`, what `server.python` gives), with what the CPU build needs."""
    executor = LocalExecutor()
    port = executor.free_port()
    spec = build_launch(
        VLLM,
        setup.cpu_config(config),
        model=model,
        port=port,
        fill={"host": "127.0.0.1"},
        python=setup.python,
        startup_timeout_s=timeout_s,
    )
    return spec.request(port=port, log_path=str(log_dir / f"vllm-{port}.log"))


def launcher() -> ServerLauncher:
    return ServerLauncher(LocalExecutor(), extra_rules=VLLM.triage_rules)


@pytest.fixture(scope="module")
def tiny_server(vllm_setup: VllmSetup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One tiny-model server for a module's tests (eager: no compile warm-up)."""
    req = launch_request(
        vllm_setup,
        vllm_setup.model_tiny,
        tmp_path_factory.mktemp("vllm"),
        EffectiveConfig(flags={"max-model-len": 1024, "enforce-eager": True}),
    )
    with launcher().launch(req) as server:
        yield server
