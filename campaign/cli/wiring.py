"""The composition root: the one place that picks adapters for the core's ports.

A playbook's `node:` entries become `Node`s (an executor from the registry, keyed
by kind, plus the engine profile's launch knowledge), the git adapter becomes the
`SourceTree`, and the run ledger is shared by every node of a run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from campaign.domain.errors import UserError
from campaign.loop.deps import Deps, EventFn
from campaign.playbook.schema import Playbook
from campaign.ports import SourceTree
from campaign.store.facade import Store
from tools.engines import engine_profile
from tools.executors.base import Executor
from tools.executors.local import LocalExecutor
from tools.executors.project_code import WithProjectCode
from tools.executors.registry import build_executor
from tools.node_runtime import NodeRuntime
from tools.server.ledger import ProcessLedger
from tools.source.git_tree import GitTree

__all__ = ["build_deps", "check_adapters", "ledger_path", "node_runtime_for", "reap_leftovers"]


def check_adapters(pb: Playbook, source: str) -> None:
    """What only the adapters can check, before anything is recorded: the engine exists."""
    try:
        engine_profile(pb.server.engine)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None


def ledger_path(db_path: Path) -> Path:
    return db_path.parent / "ledger.jsonl"


def node_runtime_for(pb: Playbook, spec: Any, *, workdir: Path, ledger: Any = None,
                     events: EventFn | None = None) -> NodeRuntime:
    """A NodeRuntime for one `node:` entry of the playbook."""
    executor: Executor = build_executor(spec)
    sim = spec.simulated_node()
    if sim is not None and spec.remote:
        executor = WithProjectCode(executor, spec.workdir)  # the node runs the controller's code
    python = spec.node_python() or sys.executable
    fmt: dict[str, Any] = {"python": python, "host": "0.0.0.0" if spec.remote else "127.0.0.1"}
    fingerprint_argv = None
    if sim is not None:
        fmt.update(profile=sim.profile, cuda=sim.cuda, seed=sim.seed, time_scale=sim.time_scale,
                   noise_pct=sim.noise_pct, launch_offset_pct=sim.launch_offset_pct,
                   launch_seed_base=sim.seed if sim.launch_offsets == "seeded" else None)
        fingerprint_argv = [python, "-m", "tools.simnode", "fingerprint", "--profile", sim.profile,
                            "--cuda", sim.cuda]
    progress = (lambda kind, data: events(kind, {**data, "node": spec.name})) if events else None
    profile = engine_profile(pb.server.engine)  # the one source of the engine's launch knowledge
    return NodeRuntime(
        spec.name or getattr(spec, "host", "node"), executor, profile=profile, command=pb.server.command,
        python=pb.server.python, model=pb.server.model, health=pb.server.health, startup_timeout_s=pb.server.startup_timeout_s, fmt=fmt,
        workdir=str(spec.node_workdir() or workdir), fingerprint_argv=fingerprint_argv, ledger=ledger,
        progress=progress, sweep_on=spec.sweep_location(), base_env=pb.server.base_env,
    )


def build_deps(pb: Playbook, store: Store, *, db_path: Path, events: EventFn | None) -> Deps:
    workdir = db_path.parent / "nodes"
    ledger = ProcessLedger(ledger_path(db_path))
    nodes = [node_runtime_for(pb, spec, workdir=workdir / (spec.name or "node"), ledger=ledger, events=events)
             for spec in pb.all_nodes()]
    planner = None
    if pb.planner.kind == "llm":
        from campaign.loop.planner_bridge import make_llm_planner

        planner = make_llm_planner(pb)
    trees = [source_tree_for(pb, spec, node.executor, workdir=workdir / (spec.name or "node"))
             for spec, node in zip(pb.all_nodes(), nodes)] if pb.server.source is not None else []
    return Deps(playbook=pb, store=store, nodes=list(nodes), planner=planner, journal_path=Path(pb.journal),
                db_label=str(db_path), events=events or (lambda k, d: None), source=local_source_tree,
                trees=list[SourceTree](trees))


def source_tree_for(pb: Playbook, spec: Any, executor: Executor, *, workdir: Path) -> GitTree:
    """`server.source` on one node: git runs there, through the node's own executor."""
    assert pb.server.source is not None
    where = spec.node_workdir()
    return GitTree(executor, pb.server.source.repo,
                   f"{where}/src" if where else str((workdir / "src").resolve()))


def local_source_tree(repo: str) -> GitTree:
    """A repository on this machine (the planner's patch checks), worktrees in a temp dir."""
    import tempfile

    if not (Path(repo) / ".git").exists():
        from campaign.domain.errors import UserError

        raise UserError(f"{repo}: not a git repository (fix: point knobs.patches.repo at a git checkout)")
    return GitTree(LocalExecutor(), str(Path(repo).resolve()), str(Path(tempfile.gettempdir()) / "campaign-src"))


def reap_leftovers(db_path: Path, pb: Playbook) -> list[str]:
    """Stop every server a dead run left behind (the run ledger), before anything starts.
    Each handle goes to the executor of the node that started it (kind and host)."""
    ledger = ProcessLedger(ledger_path(db_path))
    if not ledger.live() and not ledger.intents():
        return []
    executors = [build_executor(spec) for spec in pb.all_nodes()]

    def executor_for(handle: Any) -> Executor:
        same_kind = [e for e in executors if e.kind == handle.executor]
        same_host = [e for e in same_kind if e.host == handle.host]
        chosen = same_host or same_kind
        return chosen[0] if chosen else LocalExecutor()

    return [f"{h.executor}:{h.pid or h.job_id}" for h in ledger.reap(executor_for)]
