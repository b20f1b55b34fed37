"""Adding a node kind is one executor module and one registry entry: a throwaway kind,
written here as a module of its own (its playbook spec and its executor), is validated,
planned and run as a tiny campaign through the registry alone (no other file of the
project names it): the playbook's `node:` union, its errors and its JSON Schema follow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from campaign.cli.common import open_store
from campaign.cli.plan import make_plan
from campaign.cli.runner import start_campaign
from campaign.cli.schema_cmd import schema_text
from campaign.domain.errors import UserError
from campaign.playbook.load import load_playbook
from tests.campaign.sim_playbook import tiny_playbook, write_playbook
from tests.module_file import import_module_file
from tools.executors.registry import NODE_KINDS, NodeKind, build_executor, install_node_kinds

#: the whole node kind: what its `node:` entry holds, and the executor built from it (this
#: machine's processes, each launch counted so the test sees the campaign went through it)
TOY = '''
from typing import Literal

from pydantic import Field

from campaign.playbook.nodes import NodeSpecBase, SimulatedNodeSpec
from tools.executors.local import LocalExecutor


class ToyNodeSpec(NodeSpecBase):
    """A node that runs the simulated server on this machine and counts its launches."""

    kind: Literal["toy"] = Field(description="a throwaway node kind")
    name: str = Field(default="toy-0", description="the node's name in the record and the journal")
    simulated: SimulatedNodeSpec = Field(description="the simulated node it runs")

    def simulated_node(self):
        return self.simulated

    def describe(self):
        return f"toy {self.name}"

    def where(self):
        return "toy: the command below runs on this machine, counted"


class ToyExecutor(LocalExecutor):
    kind = "toy"
    launches = []

    @classmethod
    def from_spec(cls, spec):
        return cls()

    def start(self, argv, **kwargs):
        ToyExecutor.launches.append(list(argv))
        return super().start(argv, **kwargs)
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    module = import_module_file(tmp_path, "toy_node", TOY, monkeypatch)
    NODE_KINDS["toy"] = NodeKind(module.ToyNodeSpec, module.ToyExecutor.from_spec)  # the registry entry
    install_node_kinds()  # what the composition root does at start
    try:
        yield module
    finally:
        del NODE_KINDS["toy"]
        install_node_kinds()


def _playbook(tmp_path: Path, node: dict[str, object]) -> Path:
    data = tiny_playbook(tmp_path, "toy", [{"name": "bigger-graph", "flags": {"cuda-graph-max-bs": 768}}])
    data["node"] = node
    return write_playbook(tmp_path / "toy.yaml", data)


def test_a_new_node_kind_is_one_module_and_a_registry_entry(toy: ModuleType, tmp_path: Path) -> None:
    sim = {"seed": 1, "time_scale": 400, "noise_pct": 1.0}
    playbook = _playbook(tmp_path, {"kind": "toy", "name": "toy-0", "simulated": sim})
    pb = load_playbook(str(playbook))
    assert isinstance(pb.node, toy.ToyNodeSpec) and pb.node.node_time_scale() == 400
    assert isinstance(build_executor(pb.node), toy.ToyExecutor)
    assert make_plan(pb, str(playbook)).nodes == {"toy-0": "toy: the command below runs on this machine, counted"}

    schema = json.loads(schema_text())  # editors complete the new kind's fields
    assert "toy" in schema["properties"]["node"]["discriminator"]["mapping"]

    out = start_campaign(str(playbook), db=str(tmp_path / "state" / "campaign.db"))
    assert out.status == "finished", out
    assert len(toy.ToyExecutor.launches) >= 2  # the baseline and the candidate went through the toy executor
    store = open_store(str(tmp_path / "state" / "campaign.db"))
    assert store.get_campaign(out.campaign_id).node == "toy toy-0"
    assert {e.hypothesis for e in store.list_experiments(out.campaign_id)} >= {"bigger-graph"}


def test_a_new_node_kinds_mistakes_get_the_playbooks_one_line_errors(toy: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        load_playbook(str(_playbook(tmp_path, {"kind": "toy", "simulatd": {}})))
    assert "node.simulatd" in str(err.value) and "simulated" in str(err.value)  # the typo, and the fix
    with pytest.raises(UserError) as err:
        load_playbook(str(_playbook(tmp_path, {"kind": "toyy"})))
    assert "toy" in str(err.value).split("toyy", 1)[1]  # the kinds listed include the new one


def test_without_its_registry_entry_the_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        load_playbook(str(_playbook(tmp_path, {"kind": "toy", "simulated": {}})))
    assert "(fix: use one of 'simulated', 'local', 'ssh', 'slurm')" in str(err.value)
