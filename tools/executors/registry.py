"""The executor registry: node `kind` -> a builder of the executor for that node spec.

Adding a node kind is one executor module, one line here (and its spec in the playbook
schema); the contract suite (tests/tools/executors/test_contract.py) then runs it
through the same cases as every other kind.  Builders read the spec's fields by name,
so this module does not depend on the playbook.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from campaign.domain.errors import UserError
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor
from tools.executors.slurm import SlurmExecutor
from tools.executors.ssh import SshExecutor

__all__ = ["EXECUTORS", "build_executor"]


def _local(spec: Any) -> Executor:
    return LocalExecutor()


def _ssh(spec: Any) -> Executor:
    identity = os.path.expanduser(spec.identity_file) if spec.identity_file else None
    if identity and not os.path.isfile(identity):
        raise UserError(f"playbook: node.identity_file: no such file '{spec.identity_file}' "
                        f"(fix: point it at the private key, or remove it to use ~/.ssh/config and the agent)")
    if spec.port is not None and not 0 < spec.port < 65536:
        raise UserError(f"playbook: node.port: {spec.port} is not a TCP port (fix: 1-65535, usually 22)")
    return SshExecutor(spec.host, user=spec.user, port=spec.port, identity_file=identity,
                       ssh_options=spec.ssh_options, workdir=spec.workdir, python=spec.python)


def _slurm(spec: Any) -> Executor:
    if spec.gpus is not None and spec.gpus < 1:
        raise UserError(f"playbook: node.gpus: {spec.gpus} (fix: a positive GPU count, or remove it)")
    return SlurmExecutor(partition=spec.partition, gres=spec.gres, gpus=spec.gpus, time_limit=spec.time_limit,
                         exclusive=spec.exclusive, workdir=spec.workdir, python=spec.python)


#: node kind -> builder; the one place that maps a kind to an executor class.
EXECUTORS: dict[str, Callable[[Any], Executor]] = {
    "simulated": _local,
    "local": _local,
    "ssh": _ssh,
    "slurm": _slurm,
}


def build_executor(spec: Any) -> Executor:
    """A ready (not yet connected) executor for `spec`; UserError for a bad spec."""
    kind = getattr(spec, "kind", None)
    builder = EXECUTORS.get(str(kind))
    if builder is None:
        raise UserError(f"playbook: node.kind: unknown node kind {kind!r} (fix: one of {', '.join(EXECUTORS)})")
    return builder(spec)
