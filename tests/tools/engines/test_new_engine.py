"""Adding an engine is one module and one registry entry: a throwaway engine, written
here as a module of its own, is planned, launched, read and triaged by the campaign
through its profile alone (no other file of the project names it)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from campaign.cli.plan import make_plan
from campaign.cli.wiring import check_adapters, node_runtime_for
from campaign.domain.models import EffectiveConfig, FailureClass, WorkloadSpec
from campaign.playbook.load import load_playbook
from tests.module_file import import_module_file
from tools.engines import ENGINES

#: the whole engine: its launch (the simulated server stands in for a real one), the
#: variables it reads, its metrics reader, its start-up log reader and a triage rule
TOY = """
import json

from campaign.domain.models import FailureClass
from tools.engines.base import EngineMetrics, EngineProfile
from tools.engines.startup_log import StartupConfig, parse_keywords
from tools.server.triage import rule


def parse_metrics(body):
    info = json.loads(body)
    return EngineMetrics(engine="toy", spec_accept_length=info.get("spec_accept_length") or None,
                         server_args={"time_scale": info.get("time_scale")})


def read_startup(lines):
    config = StartupConfig(engine="toy")
    for line in lines:
        if "server_args=ServerArgs(" in line:
            config.resolved = parse_keywords(line.split("server_args=ServerArgs(", 1)[1])
    return config


PROFILE = EngineProfile(
    name="toy", command="{python} -m tools.simnode --model-path {model} --host {host} --port {port} --time-scale 40 {flags}",
    own_env=("TOY_*",), env_defaults={"TOY_MODE": "fast"}, metrics_path="/server_info", startup_timeout_s=60,
    metrics_parser=parse_metrics, startup_reader=read_startup,
    triage_rules=(rule(FailureClass.unsupported_arch, r"TOY: no accelerator", 5, "toy needs an accelerator"),),
)
"""


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = import_module_file(tmp_path, "toy_engine", TOY, monkeypatch)
    monkeypatch.setitem(ENGINES, "toy", module.PROFILE)  # the registry entry
    return module


def test_a_new_engine_is_one_module_and_a_registry_entry(toy: ModuleType, tmp_path: Path) -> None:
    playbook = tmp_path / "toy.yaml"
    playbook.write_text(f"""
name: toy
journal: {tmp_path}/journal.md
node: {{kind: local, workdir: {tmp_path}/node}}
server: {{engine: toy, model: simulated-glm}}
baseline: {{flags: {{cuda-graph-max-bs: 160}}}}
workloads:
  w: {{concurrency: [1], output_tokens: 8, requests_per_level: 2, warmup_requests: 0}}
hypotheses:
  - name: bigger-graph
    flags: {{cuda-graph-max-bs: 512}}
""")
    pb = load_playbook(str(playbook))
    check_adapters(pb, str(playbook))
    plan = make_plan(pb, str(playbook))
    assert plan.launches[0].command.endswith("--time-scale 40 --cuda-graph-max-bs 160")
    assert plan.launches[0].env == {"TOY_MODE": "fast"} and "TOY_*" in plan.launches[0].inherits

    node = node_runtime_for(pb, pb.node, workdir=tmp_path / "nodes")
    wl = WorkloadSpec(name="w", concurrency=[1], output_tokens=8, requests_per_level=2, warmup_requests=0)
    m = node.measure(EffectiveConfig(flags={"cuda-graph-max-bs": 160}), [wl], label="toy")
    assert m.failure is None, m.failure
    assert m.time_scale == pytest.approx(40.0)  # its metrics reader
    assert m.reported is not None and m.reported.flags["cuda-graph-max-bs"] == 160  # its start-up log reader

    failure = toy.PROFILE.classify(1, ["loading", "TOY: no accelerator found", "bye"])  # its triage rule
    assert failure.failure_class == FailureClass.unsupported_arch
