"""The composition root: the one place that picks adapters for the core's ports.

A playbook's `node:` entries become `Node`s (an executor from the registry, keyed
by kind, plus the engine profile's launch knowledge), the git adapter becomes the
`SourceTree`, and the run ledger is shared by every node of a run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.domain.errors import UserError
from campaign.domain.redact import remember_secret
from campaign.loop.deps import Deps, EventFn
from campaign.playbook.schema import Playbook
from campaign.ports import SourceTree
from campaign.ports.store import LoopStore
from campaign.store.facade import Store
from tools.engines import engine_profile
from tools.executors.base import Executor, NodeError
from tools.executors.local import LocalExecutor
from tools.executors.project_code import WithProjectCode
from tools.executors.registry import build_executor, install_node_kinds
from tools.node_runtime import NodeRuntime
from tools.server.ledger import ProcessLedger
from tools.source.git_tree import GitTree

# the playbook's `node:` kinds are the executor registry's: set before any playbook is read
install_node_kinds()

__all__ = ["build_deps", "check_adapters", "ledger_path", "node_runtime_for", "reap_leftovers"]

if TYPE_CHECKING:  # mypy holds both stores to the store port's contract: the SQLite store to all of it (the
    # journal's and the verdict's reads included), the read-only reader of `campaign journal` to the journal's
    from campaign.ports.store import JournalReader
    from campaign.store.reader import ReadOnlyStore

    _STORE_PORT: type[LoopStore] = Store
    _READER_PORT: type[JournalReader] = ReadOnlyStore


def check_adapters(pb: Playbook, source: str) -> None:
    """What only the adapters can check, before anything is recorded: the engine exists, the
    planner's key would go only where it is meant (campaign.planner.resolve_endpoint), a local
    node has the engine's python, no hypothesis launches what the baseline does."""
    from campaign.planner import resolve_endpoint

    try:
        engine_profile(pb.server.engine)
        if pb.planner.kind == "llm":
            resolve_endpoint(pb.planner)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    from campaign.cli.checks import adapter_problems

    adapter_problems(pb, source)


def ledger_path(db_path: Path) -> Path:
    return db_path.parent / "ledger.jsonl"


def node_runtime_for(
    pb: Playbook, spec: Any, *, workdir: Path, ledger: Any = None, events: EventFn | None = None
) -> NodeRuntime:
    """A NodeRuntime for one `node:` entry of the playbook."""
    executor: Executor = build_executor(spec)
    node_dir = remote_workdir(spec, executor) if spec.remote else None
    sim = spec.simulated_node()
    if sim is not None and node_dir is not None:
        executor = WithProjectCode(executor, node_dir)  # the node runs the controller's code
    python = spec.node_python() or sys.executable
    fmt: dict[str, Any] = {"python": python, "host": "0.0.0.0" if spec.remote else "127.0.0.1"}
    fingerprint_argv = None
    if sim is not None:
        fmt.update(
            profile=sim.profile,
            cuda=sim.cuda,
            seed=sim.seed,
            time_scale=sim.time_scale,
            noise_pct=sim.noise_pct,
            launch_offset_pct=sim.launch_offset_pct,
            launch_seed_base=sim.seed if sim.launch_offsets == "seeded" else None,
        )
        fingerprint_argv = [python, "-m", "tools.simnode", "fingerprint", "--profile", sim.profile, "--cuda", sim.cuda]
    progress = (lambda kind, data: events(kind, {**data, "node": spec.name})) if events else None
    profile = engine_profile(pb.server.engine)  # the one source of the engine's launch knowledge
    return NodeRuntime(
        spec.node_name(),
        executor,
        profile=profile,
        command=pb.server.command,
        python=pb.server.python,
        model=pb.server.model,
        health=pb.server.health,
        startup_timeout_s=pb.server.startup_timeout_s,
        fmt=fmt,
        workdir=node_dir or str(workdir),
        fingerprint_argv=fingerprint_argv,
        ledger=ledger,
        progress=progress,
        sweep_on=spec.sweep_location(),
        base_env=pb.server.base_env,
        api_key=server_api_key(pb),
    )


def server_api_key(pb: Playbook) -> str | None:
    """The value of `server.api_key_env` (the key the load generator sends the server)."""
    import os

    name = pb.server.api_key_env
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise UserError(f"server.api_key_env: {name} is not set (fix: export {name}=<the server's API key>)")
    remember_secret(value)
    return value


def build_deps(pb: Playbook, store: Store, *, db_path: Path, events: EventFn | None, db_label: str = "") -> Deps:
    """`db_path`: where this controller's local state lives (campaign.domain.location.state_anchor)."""
    workdir = db_path.parent / "nodes"
    ledger = ProcessLedger(ledger_path(db_path))
    nodes = [
        node_runtime_for(pb, spec, workdir=workdir / (spec.name or "node"), ledger=ledger, events=events)
        for spec in pb.all_nodes()
    ]
    planner = None
    if pb.planner.kind == "llm":
        from campaign.loop.planner_bridge import make_llm_planner

        planner = make_llm_planner(pb)
    trees = (
        [
            source_tree_for(pb, spec, node.executor, workdir=workdir / (spec.name or "node"))
            for spec, node in zip(pb.all_nodes(), nodes)
        ]
        if pb.server.source is not None
        else []
    )
    return Deps(
        playbook=pb,
        store=store,
        nodes=list(nodes),
        planner=planner,
        journal_path=Path(pb.journal),
        db_label=db_label or str(db_path),
        events=events or (lambda k, d: None),
        source=local_source_tree,
        trees=list[SourceTree](trees),
    )


def remote_workdir(spec: Any, executor: Executor) -> str:
    """A remote node's workdir as its paths are built: `~/...` is the node user's home,
    which only the node can say (one connection now); any other path is used as written
    and checked (private, ours) by the executor on first use, inside the loop, where an
    unreachable node is an interrupt the campaign resumes from."""
    path = str(spec.workdir)
    if not path.startswith("~"):
        return path
    try:
        return str(getattr(executor, "workdir", path))
    except NodeError as exc:
        name = spec.node_name()
        raise UserError(
            f"node {name}: {exc} (fix: check that the node is reachable, or give node.workdir "
            "as an absolute path, then run again)"
        ) from None


def source_tree_for(pb: Playbook, spec: Any, executor: Executor, *, workdir: Path) -> GitTree:
    """`server.source` on one node: git runs there, through the node's own executor."""
    assert pb.server.source is not None
    where = remote_workdir(spec, executor) if spec.remote else None
    return GitTree(executor, pb.server.source.repo, f"{where}/src" if where else str((workdir / "src").resolve()))


def local_source_tree(repo: str) -> GitTree:
    """A repository on this machine (the planner's patch checks), worktrees in a temp dir."""
    import tempfile

    if not (Path(repo) / ".git").exists():
        raise UserError(f"{repo}: not a git repository (fix: point knobs.patches.repo at a git checkout)")
    from tools.executors.remote_shell import ensure_private_dir

    scratch = str(Path(tempfile.gettempdir()) / f"campaign-src-{os.getuid()}")  # this user's, 0700
    problem = ensure_private_dir(scratch)
    if problem:
        raise UserError(problem.replace("node workdir", "patch-check directory"))
    return GitTree(LocalExecutor(), str(Path(repo).resolve()), scratch)


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
