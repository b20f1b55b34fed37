"""The SQLite checkpointer with a crash-test point after a task's writes are saved.

Used only when `campaign.domain.killpoint` is asked for: `<node>:writes` is the window
where LangGraph holds a finished node's writes but not yet the step's checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from campaign.domain import killpoint

__all__ = ["KillPointSaver", "node_of"]


def node_of(task_path: str) -> str:
    """The node name of a pull task's path ("~__pregel_pull, record" -> "record")."""
    parts = task_path.lstrip("~").split(", ")
    return parts[1] if len(parts) >= 2 and parts[0] == "__pregel_pull" else ""


class KillPointSaver(SqliteSaver):
    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        name = node_of(task_path)
        if name:
            killpoint.reached(f"{name}:writes")
