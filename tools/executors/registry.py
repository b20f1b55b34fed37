"""The node-kind registry: `kind` -> the playbook spec model and the executor built from it.

Adding a node kind is one executor module (its spec model, a subclass of
`campaign.playbook.nodes.NodeSpecBase`, and its executor with a `from_spec` builder) and
one entry here.  `install_node_kinds` hands the specs to the playbook, whose `node:` union,
error messages and JSON Schema are built from them; the composition root calls it before
a playbook is read.  The contract suite (tests/tools/executors/test_contract.py) runs
every executor through the same cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from campaign.domain.errors import UserError
from campaign.playbook.nodes import NodeSpecBase, SimulatedNodeSpec
from campaign.playbook.schema import use_node_kinds
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor, LocalNodeSpec
from tools.executors.slurm import SlurmExecutor, SlurmNodeSpec
from tools.executors.ssh import SshExecutor, SshNodeSpec

__all__ = ["NODE_KINDS", "NodeKind", "build_executor", "install_node_kinds"]


@dataclass(frozen=True)
class NodeKind:
    """One node kind: what a playbook's `node:` entry of that kind holds, and how it
    becomes an executor (UserError for settings that cannot work)."""

    spec: type[NodeSpecBase]
    build: Callable[[Any], Executor]


#: node kind -> its spec and builder; the one place that maps a kind to an executor class.
NODE_KINDS: dict[str, NodeKind] = {
    "simulated": NodeKind(SimulatedNodeSpec, LocalExecutor.from_spec),
    "local": NodeKind(LocalNodeSpec, LocalExecutor.from_spec),
    "ssh": NodeKind(SshNodeSpec, SshExecutor.from_spec),
    "slurm": NodeKind(SlurmNodeSpec, SlurmExecutor.from_spec),
}


def install_node_kinds() -> None:
    """Make the registry's kinds the playbook's node kinds (idempotent)."""
    use_node_kinds(kind.spec for kind in NODE_KINDS.values())


def build_executor(spec: NodeSpecBase) -> Executor:
    """A ready (not yet connected) executor for `spec`; UserError for a bad spec."""
    kind = getattr(spec, "kind", None)
    entry = NODE_KINDS.get(str(kind))
    if entry is None:
        raise UserError(f"playbook: node.kind: unknown node kind {kind!r} (fix: one of {', '.join(NODE_KINDS)})")
    return entry.build(spec)
