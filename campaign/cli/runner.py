"""Run and resume campaigns: compile the graph with the SQLite checkpointer and drive it.

The record (store) and the checkpoints live in two SQLite files side by side: the
store is the source of truth for results, the checkpoint only says where the graph
stands.  One `RunOutcome` tells the CLI what happened; the CLI alone prints.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from campaign.cli.checks import identical_launches
from campaign.cli.wiring import build_deps, check_adapters, reap_leftovers
from campaign.domain.errors import UserError
from campaign.domain.location import is_url, redact, resolve, state_anchor
from campaign.domain.models import Failure
from campaign.domain.redact import redact_text
from campaign.journal.owner import claim_journal
from campaign.journal.publish import refresh_journal
from campaign.journal.render import clean_temp_files
from campaign.loop.deps import Deps, EventFn
from campaign.playbook.load import apply_overrides, load_playbook
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.store import LoopStore
from campaign.store.view import halt_failure
from tools.executors.base import NodeError

if TYPE_CHECKING:  # sqlmodel is imported when a store is opened
    from campaign.store.facade import Store


@dataclass
class RunOutcome:
    campaign_id: str
    status: Literal["finished", "awaiting_review", "failed", "interrupted"]
    reason: str = ""
    journal: str = ""
    failure: Failure | None = None  # the failed launch that stopped it, with its deciding lines

    @property
    def exit_code(self) -> int:
        return {"finished": 0, "awaiting_review": 3, "failed": 1, "interrupted": 130}[self.status]


class Interrupted(BaseException):
    """SIGTERM/SIGINT: stop cleanly (servers stopped by their context managers).  A
    BaseException, like KeyboardInterrupt, so no `except Exception` on the way up can
    mistake a stop for a failure of the server under test."""


def checkpoint_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.stem + "-checkpoints.sqlite")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "campaign"


@contextmanager
def _signals_raise() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def compiled_graph(deps: Deps, db: str) -> Iterator[Any]:
    """The graph with its checkpointer: PostgresSaver in the same PostgreSQL database as
    the store, else a SQLite file next to the store's."""
    from campaign.domain import killpoint
    from campaign.loop.graph import build_graph

    if is_url(db):
        from campaign.cli.killsaver import postgres_saver

        with postgres_saver(db, kill_points=killpoint.active()) as saver:
            yield build_graph(deps).compile(checkpointer=saver)
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver_cls = SqliteSaver
    if killpoint.active():
        from campaign.cli.killsaver import KillPointSaver as saver_cls
    from campaign.domain.private import private_file

    with saver_cls.from_conn_string(str(private_file(checkpoint_path(Path(db))))) as saver:
        saver.conn.execute("PRAGMA journal_mode=WAL")
        yield build_graph(deps).compile(checkpointer=saver)


def in_progress(snap: Any) -> bool:
    """The checkpoint has work left: a next task, or a task whose writes were saved
    before the step's checkpoint (a kill in between).  LangGraph's live snapshot drops
    a task with saved writes from `next`, so `next` alone would call such a graph
    ended and a fresh input would throw the saved writes away."""
    return bool(snap.next) or bool(snap.tasks)


def open_store(db: str) -> Store:
    from campaign.store import Store

    return Store(db)


def _drive(graph: Any, payload: Any, cid: str, store: LoopStore, on_stop: Any = None) -> RunOutcome:
    cfg = {"configurable": {"thread_id": cid}, "recursion_limit": 10_000}
    try:
        with _signals_raise():
            # "sync": a step's checkpoint is on disk before the next step starts, so a
            # kill -9 loses at most the step in hand (the default "async" can lose more)
            graph.invoke(payload, cfg, durability="sync")
    except (KeyboardInterrupt, Interrupted) as exc:
        # the node in hand runs in a worker thread: stop what this run started (the ledger
        # knows) instead of waiting for that thread to finish its measurement
        if on_stop is not None:
            on_stop()
        store.add_event(cid, "interrupted", f"stopped by {exc.__class__.__name__} {exc}")
        return RunOutcome(cid, "interrupted", reason=str(exc) or "interrupted")
    except NodeError as exc:
        # the node cannot be reached, or refused what the step asked of it (outside a
        # launch, where it is an infrastructure failure the campaign retries): the
        # recorded results and the checkpoint stand; fix the node and resume
        why = redact_text(" ".join(str(exc).split()))[:400]
        if on_stop is not None:
            try:
                on_stop()
            except Exception:  # the same node may refuse the reaping too: the ledger keeps it
                pass
        store.add_event(cid, "interrupted", f"stopped: the node failed: {why}")
        raise UserError(
            f"campaign {cid}: the node failed: {why} (fix: the node itself, or its host, user, "
            f"workdir or python in the playbook's node: entry, then campaign resume {cid})"
        ) from None
    snap = graph.get_state(cfg)
    row = store.get_campaign(cid)
    if snap.next:
        reason = row.halt_reason or "awaiting review"
        return RunOutcome(cid, "awaiting_review", reason=reason)
    return RunOutcome(
        cid,
        "failed" if row.status == "failed" else "finished",
        reason=row.halt_reason or "",
        failure=halt_failure(row.status, store.list_experiments(cid, role="baseline")),
    )


def start_campaign(
    playbook_path: str, *, db: str | None, events: EventFn | None = None, new: bool = False
) -> RunOutcome:
    pb = load_playbook(playbook_path)
    check_adapters(pb, playbook_path)
    db = resolve(db, pb.database)
    local = state_anchor(db)
    _check_journal_writable(pb, playbook_path)
    store = open_store(db)
    existing = (
        None
        if new
        else next((c for c in store.list_campaigns(pb.name) if c.status in ("running", "awaiting_review")), None)
    )
    if existing is not None and existing.status == "awaiting_review":
        raise UserError(
            f"{playbook_path}: campaign '{existing.id}' is awaiting review: {existing.halt_reason} "
            f"(fix: campaign resume {existing.id} --approve | --reject)"
        )
    reap_leftovers(local, pb)
    if existing is not None:
        cid = existing.id
        pb = apply_overrides(pb, existing.overrides)
    else:
        node = ", ".join(_describe_node(n) for n in pb.all_nodes())
        scale = pb.node.node_time_scale()
        cid = store.create_campaign(
            pb.name, playbook=pb, playbook_path=str(Path(playbook_path).resolve()), node=node, time_scale=scale
        ).id
        for pos, h in enumerate(pb.hypotheses):
            store.upsert_hypothesis(cid, h, source="playbook", position=pos)
    with store.run_lock(cid, owner=f"pid {os.getpid()}"):
        pb = own_journal(pb, cid)
        deps = build_deps(pb, store, db_path=local, db_label=redact(db), events=events)
        _announce(events, pb, store, cid)
        _reap_worktrees(deps, cid)
        with compiled_graph(deps, db) as graph:
            _mark_stale(graph, store, cid)
            clean_temp_files(Path(pb.journal))
            started = graph.get_state({"configurable": {"thread_id": cid}}).values
            payload = (
                None
                if started
                else {
                    "campaign_id": cid,
                    "no_win_streak": 0,
                    "dead_end_streak": 0,
                    "experiments_done": 0,
                    "baseline_config": None,
                }
            )
            out = _drive(graph, payload, cid, store, on_stop=lambda: reap_leftovers(local, pb))
    out.journal = pb.journal
    return out


def _announce(events: EventFn | None, pb: Playbook, store: LoopStore, cid: str) -> None:
    """The live view's limits: rounds at most, the node-time budget, the time scale and
    the node time already recorded (a resumed campaign)."""
    if events is not None:
        events(
            "campaign",
            {
                "id": cid,
                "max_rounds": pb.verdict.repeats.max,
                "max_hours": pb.budget.max_hours,
                "time_scale": pb.node.node_time_scale(),
                "node_seconds": store.loop_tally(cid).node_seconds,
            },
        )


def resume_campaign(
    cid: str,
    *,
    db: str | None,
    decision: str | None,
    note: str = "",
    add_hypothesis: str | None = None,
    overrides: dict[str, str] | None = None,
    playbook_path: str | None = None,
    events: EventFn | None = None,
) -> RunOutcome:
    from langgraph.types import Command

    db = resolve(db)
    local = state_anchor(db)
    if not is_url(db) and not local.exists():
        raise UserError(f"{db}: no campaign database here (fix: pass --db PATH, as given to campaign run)")
    store = open_store(db)
    row = store.get_campaign(cid)
    pb = load_playbook(playbook_path or row.playbook_path)
    check_adapters(pb, playbook_path or row.playbook_path)
    merged = {**row.overrides, **(overrides or {})}
    pb = apply_overrides(pb, merged)  # validates every override
    added: list[dict[str, Any]] = []
    if add_hypothesis:
        added = [h.model_dump() for h in _load_added(add_hypothesis, pb, store, cid)]
    # every input is valid by now: record the overrides and what the node has become
    node_text = ", ".join(_describe_node(n) for n in pb.all_nodes())
    if merged != row.overrides or node_text != row.node:
        store.update_campaign(cid, overrides=merged, node=node_text)
    reap_leftovers(local, pb)
    with store.run_lock(cid, owner=f"pid {os.getpid()}"):
        pb = own_journal(pb, cid)
        deps = build_deps(pb, store, db_path=local, db_label=redact(db), events=events)
        _announce(events, pb, store, cid)
        _reap_worktrees(deps, cid)
        with compiled_graph(deps, db) as graph:
            _mark_stale(graph, store, cid)
            clean_temp_files(Path(pb.journal))
            snap = graph.get_state({"configurable": {"thread_id": cid}})
            if snap.next and any(t.interrupts for t in snap.tasks):
                if decision is None:
                    raise UserError(
                        f"campaign {cid} is awaiting review: {row.halt_reason} (fix: add --approve or --reject)"
                    )
                payload: Any = Command(
                    resume={
                        "decision": decision,
                        "note": note,
                        "add_hypotheses": added,
                        "overrides": overrides or {},
                        "at": time.time(),
                    }
                )
            elif not in_progress(snap) and store.get_campaign(cid).status == "finished":
                refresh_journal(store, cid, Path(pb.journal), db_label=redact(db))
                raise UserError(f"campaign {cid} is finished (fix: start a new one with campaign run PLAYBOOK)")
            else:
                for h in added:
                    store.upsert_hypothesis(cid, HypothesisSpec.model_validate(h), source="review")
                # from the checkpoint with its saved writes; a fresh input only once the graph ended
                payload = None if in_progress(snap) else {"campaign_id": cid}
            out = _drive(graph, payload, cid, store, on_stop=lambda: reap_leftovers(local, pb))
    out.journal = pb.journal
    return out


def own_journal(pb: Playbook, cid: str) -> Playbook:
    """`pb` with the journal path this campaign writes (campaign.journal.owner)."""
    return pb.model_copy(update={"journal": str(claim_journal(Path(pb.journal), cid, pb.name))})


def _reap_worktrees(deps: Any, cid: str) -> list[str]:
    """Worktrees a killed run of this campaign left on its nodes (branches stay)."""
    return [path for tree in deps.trees for path in tree.reap(cid)]


def _mark_stale(graph: Any, store: Store, cid: str) -> list[str]:
    """Experiments a dead run left `running` become stale (re-run as a new attempt),
    except the ones the checkpoint is in the middle of: the graph continues those.

    A node killed before its checkpoint runs again from its top with the attempt
    numbers the checkpoint holds, so "in the middle of" is keyed by those numbers, not
    by ids the state may not hold yet: the current hypothesis's attempt (killed in
    `apply` after the experiment row was written), and the baseline's next attempt
    (killed while the very first baseline was measuring).  A hypothesis left
    `running` by a `propose` whose checkpoint was never written is queued again."""
    snap = graph.get_state({"configurable": {"thread_id": cid}})
    values = snap.values or {}  # saved writes of a killed step included (a live snapshot)
    going = in_progress(snap)
    current = (values.get("current") or {}) if going else {}  # the graph ended: it restarts
    keep = [e for e in (current.get("experiment_id"),) if e]
    in_flight = [current] + list((values.get("batch") or []) if going else [])  # parallel branches too
    for cur in in_flight:
        if cur.get("hypothesis"):
            keep += [
                e.id
                for e in store.list_experiments(cid, hypothesis=cur["hypothesis"])
                if e.attempt == cur.get("attempt")
            ]
    attempt = values.get("baseline_attempt") or 0
    keep += [e.id for e in store.list_experiments(cid, role="baseline") if e.attempt in (attempt, attempt + 1)]
    for h in store.list_hypotheses(cid, status="running"):
        if h.name not in {c.get("hypothesis") for c in in_flight}:
            store.set_hypothesis_status(cid, h.name, "queued")
    stale: list[str] = store.mark_stale_experiments(cid, keep=keep)
    return stale


def repair_journal(store: Store, cid: str, *, db_label: str) -> bool:
    """`status` and friends: re-render a journal older than the record (a kill between
    a record write and its render) unless a live run holds the campaign, whose next
    render will do it.  Best effort: a moved playbook or an unwritable journal is left
    to `campaign journal`, which names the problem."""
    import socket

    from campaign.store.lock import holder_is_stale

    held = store.lock_holder(cid)
    if held is not None and not holder_is_stale(held, socket.gethostname()):
        return False
    row = store.get_campaign(cid)
    try:
        path = Path(apply_overrides(load_playbook(row.playbook_path), row.overrides).journal)
        if not path.parent.is_dir():
            return False
        path = claim_journal(path, cid, row.name)
        clean_temp_files(path)
        return refresh_journal(store, cid, path, db_label=db_label)
    except UserError:
        return False


def _describe_node(spec: Any) -> str:
    return str(spec.describe())


def _load_added(path: str, pb: Playbook, store: LoopStore, cid: str) -> list[HypothesisSpec]:
    import yaml
    from pydantic import ValidationError

    p = Path(path)
    if not p.is_file():
        raise UserError(f"{path}: no such file (fix: give a YAML file with a list of hypotheses)")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: malformed YAML: {getattr(exc, 'problem', exc)} (fix: check indentation)") from None
    items = data.get("hypotheses", data) if isinstance(data, dict) else data
    if isinstance(items, dict):
        items = [items]
    out = []
    known = {h.name for h in store.list_hypotheses(cid)}
    for i, raw in enumerate(items or []):
        try:
            h = HypothesisSpec.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            raise UserError(f"{path}: [{i}].{field}: {err['msg']} (fix: see the hypotheses in the playbook)") from None
        if h.name in known:
            raise UserError(f"{path}: [{i}].name: hypothesis '{h.name}' already exists (fix: use a new name)")
        out.append(h)
    same = identical_launches(
        pb.model_copy(update={"hypotheses": out}),
        path,
        at=("hypotheses",) if isinstance(data, dict) and "hypotheses" in data else (),
    )
    if same:
        raise UserError(*same)
    return out


def _check_journal_writable(pb: Playbook, source: str) -> None:
    path = Path(pb.journal)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise UserError(
            f"{source}: journal: cannot create directory '{parent}' (fix: choose a writable journal path)"
        ) from None
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"{source}: journal: '{path}' is not writable (fix: choose a writable journal path)")
