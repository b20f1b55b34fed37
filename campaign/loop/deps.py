"""What the graph's nodes need from the outside world, gathered in one place.

Every field is a core type or a port (`campaign.ports`): the composition root
(`campaign.cli.wiring`) fills it with adapters, tests and benches with their own.
Nodes never construct I/O objects themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.playbook.schema import Playbook
from campaign.ports import Clock, EventSink, Node, SourceTree, SourceTreeFactory
from campaign.ports.store import LoopStore

if TYPE_CHECKING:
    from campaign.planner.base import Planner

__all__ = ["Deps", "EventFn"]

EventFn = EventSink


def _no_events(kind: str, data: dict[str, Any]) -> None:
    return None


@dataclass
class Deps:
    playbook: Playbook
    store: LoopStore
    nodes: list[Node]
    planner: Planner | None = None  # `planner: llm`; None: the queue alone
    journal_path: Path | None = Path("journal/campaign.md")  # None: no journal (the verdict lab)
    db_label: str = ""
    events: EventSink = field(default=_no_events)
    clock: Clock = time.time
    source: SourceTreeFactory | None = None  # checks proposed patches; None: patches are refused
    trees: list[SourceTree] = field(default_factory=list)  # server.source on each node (same order as nodes)

    @property
    def node(self) -> Node:
        return self.nodes[0]
