"""The campaign state machine.  `build_graph(deps)` returns an UNCOMPILED StateGraph:
the CLI compiles it with the SQLite checkpointer (thread id = campaign id), tests
with an in-memory one.  Nothing is compiled at import time.

    fingerprint -> baseline -> propose -> gate -> apply -> measure* -> verdict -> record
        -> render -> (baseline | propose | review | finish);   review -> fingerprint | finish
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph

from campaign.domain import killpoint
from campaign.loop import routing
from campaign.loop.deps import Deps
from campaign.loop.fanout import FanOut
from campaign.loop.nodes import NODE_NAMES, Nodes
from campaign.loop.parallel import ParallelState
from campaign.loop.state import CampaignState


def build_graph(deps: Deps) -> StateGraph[Any]:
    n = Nodes(deps)
    fan = FanOut(deps, n) if len(deps.nodes) > 1 else None  # several nodes: hypotheses in parallel
    g = StateGraph(ParallelState if fan else CampaignState)
    for name in NODE_NAMES:
        fn = getattr(fan if fan and name == "propose" else n, name)
        g.add_node(name, _with_kill_point(name, fn) if killpoint.active() else fn)  # type: ignore[arg-type,unused-ignore]
    g.add_edge(START, "fingerprint")
    g.add_conditional_edges("fingerprint", routing.after_fingerprint, ["review", "baseline"])
    g.add_conditional_edges("baseline", routing.after_baseline, ["propose", "finish"])
    if fan:
        fan.wire(g, ["gate", "review", "stack", "finish"])
    else:
        g.add_conditional_edges("propose", routing.after_propose, ["gate", "review", "stack", "finish"])
    g.add_conditional_edges("stack", routing.after_stack, ["gate", "finish"])
    g.add_conditional_edges("gate", routing.after_gate, ["apply", "propose"])
    g.add_edge("apply", "measure")
    max_rounds = deps.playbook.verdict.repeats.max
    g.add_conditional_edges("measure", partial(routing.after_measure, max_rounds=max_rounds), ["measure", "verdict"])
    g.add_edge("verdict", "record")
    g.add_edge("record", "render")
    g.add_conditional_edges("render", routing.after_render, ["baseline", "propose", "review", "finish"])
    g.add_conditional_edges("review", routing.after_review, ["fingerprint", "finish"])
    g.add_edge("finish", END)
    return g


def _with_kill_point(name: str, fn: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """Crash tests only (`campaign.domain.killpoint`): mark the moment a node returned,
    its store writes done and nothing of it checkpointed yet."""

    def node(state: Any) -> dict[str, Any]:
        out = fn(state)
        killpoint.reached(f"{name}:after")
        return out

    node.__name__ = name
    return node
