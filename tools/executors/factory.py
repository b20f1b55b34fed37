"""Build the executor a playbook node spec asks for.

The one place that maps `campaign.playbook.schema` node kinds to executor classes, so the
runtime never branches on `kind`: the simulated node and `local` run here, `ssh`
goes through the system OpenSSH client, `slurm` submits batch jobs.
"""

from __future__ import annotations

import os

from campaign.domain.errors import UserError
from campaign.playbook.schema import LocalNodeSpec, SimulatedNodeSpec, SlurmNodeSpec, SshNodeSpec
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor
from tools.executors.slurm import SlurmExecutor
from tools.executors.ssh import SshExecutor

NodeSpecT = SimulatedNodeSpec | LocalNodeSpec | SshNodeSpec | SlurmNodeSpec


def build_executor(spec: NodeSpecT) -> Executor:
    """A ready (not yet connected) executor for `spec`; UserError for a bad spec."""
    if isinstance(spec, (SimulatedNodeSpec, LocalNodeSpec)):
        return LocalExecutor()
    if isinstance(spec, SshNodeSpec):
        identity = os.path.expanduser(spec.identity_file) if spec.identity_file else None
        if identity and not os.path.isfile(identity):
            raise UserError(f"playbook: node.identity_file: no such file '{spec.identity_file}' "
                            f"(fix: point it at the private key, or remove it to use ~/.ssh/config and the agent)")
        if spec.port is not None and not 0 < spec.port < 65536:
            raise UserError(f"playbook: node.port: {spec.port} is not a TCP port (fix: 1-65535, usually 22)")
        return SshExecutor(spec.host, user=spec.user, port=spec.port, identity_file=identity,
                           ssh_options=spec.ssh_options, workdir=spec.workdir, python=spec.python)
    if isinstance(spec, SlurmNodeSpec):
        if spec.gpus is not None and spec.gpus < 1:
            raise UserError(f"playbook: node.gpus: {spec.gpus} (fix: a positive GPU count, or remove it)")
        return SlurmExecutor(partition=spec.partition, gres=spec.gres, gpus=spec.gpus, time_limit=spec.time_limit,
                             exclusive=spec.exclusive, workdir=spec.workdir, python=spec.python)
    raise UserError(f"playbook: node.kind: unknown node kind {getattr(spec, 'kind', spec)!r} "
                    f"(fix: one of simulated, local, ssh, slurm)")
