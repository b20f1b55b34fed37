"""What the graph's nodes need from the outside world, gathered in one place.

The CLI builds a `Deps` from a playbook; tests build one around a store in a
temp dir.  Nodes never construct I/O objects themselves.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from campaign.playbook.schema import Playbook, SimulatedNodeSpec
from tools.node_runtime import NodeRuntime

EventFn = Callable[[str, dict[str, Any]], None]


@dataclass
class Deps:
    playbook: Playbook
    store: Any  # campaign.store.Store
    nodes: list[NodeRuntime]
    planner: Any = None  # campaign.planner Planner for `planner: llm`; None: the queue alone
    journal_path: Path = Path("journal/campaign.md")
    db_label: str = ""
    events: EventFn = field(default=lambda kind, data: None)
    clock: Callable[[], float] = time.time

    @property
    def node(self) -> NodeRuntime:
        return self.nodes[0]


def node_runtime_for(pb: Playbook, spec: Any, *, workdir: Path, ledger: Any = None,
                     events: EventFn | None = None) -> NodeRuntime:
    """A NodeRuntime for one `node:` entry of the playbook."""
    from tools.executors.factory import build_executor

    executor = build_executor(spec)
    sim: SimulatedNodeSpec | None = spec if isinstance(spec, SimulatedNodeSpec) else getattr(spec, "simulated", None)
    if sim is not None and getattr(spec, "kind", "") in ("ssh", "slurm"):
        from tools.executors.project_code import WithProjectCode

        executor = WithProjectCode(executor, spec.workdir)  # the node runs the controller's code
    python = getattr(spec, "python", None) if getattr(spec, "kind", "") in ("ssh", "slurm") else sys.executable
    fmt: dict[str, Any] = {"python": python or sys.executable, "host": "127.0.0.1"}
    if getattr(spec, "kind", "") in ("ssh", "slurm"):
        fmt["host"] = "0.0.0.0"
    fingerprint_argv = None
    if sim is not None:
        fmt.update(profile=sim.profile, cuda=sim.cuda, seed=sim.seed, time_scale=sim.time_scale,
                   noise_pct=sim.noise_pct)
        fingerprint_argv = [fmt["python"], "-m", "tools.simnode", "fingerprint", "--profile", sim.profile,
                            "--cuda", sim.cuda]
    node_workdir = getattr(spec, "workdir", None) if getattr(spec, "kind", "") in ("ssh", "slurm") else None
    progress = (lambda kind, data: events(kind, {**data, "node": spec.name})) if events else None
    from tools.engines import engine_profile

    profile = engine_profile(pb.server.engine)
    sweep_on = getattr(spec, "sweep_on", "controller") if getattr(spec, "kind", "") == "ssh" else "controller"
    return NodeRuntime(
        spec.name or getattr(spec, "host", "node"), executor, command=pb.server.command, model=pb.server.model,
        health=pb.server.health, startup_timeout_s=pb.server.startup_timeout_s, fmt=fmt,
        workdir=str(node_workdir or workdir), fingerprint_argv=fingerprint_argv, ledger=ledger, progress=progress,
        extra_rules=tuple(profile.triage_rules), sweep_on=sweep_on,
        base_env=profile.base_env_for(pb.server.base_env),
    )
