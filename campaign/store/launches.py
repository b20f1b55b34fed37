"""Store methods for what each launch leaves behind, typed by (side, repeat).

A mixin of `campaign.store.Store`, written over its artifact methods (no SQL of its
own): the artifacts table keys a launch's pieces by one number, and the conversion
to and from (side, repeat) and the times' text happens here, at the store's edge
(`campaign.store.convert`), so no caller packs or parses them.
"""

from __future__ import annotations

from typing import Protocol

from campaign.ports.records import ArtifactKind, LaunchArtifact, LaunchArtifactKind, LaunchTime, RunSide
from campaign.store.convert import launch_key, launch_seq, seconds_text

__all__ = ["LaunchesMixin"]


class _Artifacts(Protocol):
    def record_artifact(self, experiment_id: str, kind: ArtifactKind, content: str, *, seq: int = 0) -> bool: ...

    def get_artifact(self, experiment_id: str, kind: ArtifactKind, seq: int = 0) -> str | None: ...

    def list_artifacts(self, experiment_id: str) -> list[tuple[str, int, str]]: ...


class LaunchesMixin:
    def record_launch_artifact(
        self: _Artifacts, experiment_id: str, kind: LaunchArtifactKind, content: str, *, side: RunSide, repeat: int
    ) -> bool:
        return self.record_artifact(experiment_id, kind, content, seq=launch_seq(side, repeat))

    def launch_artifact(
        self: _Artifacts, experiment_id: str, kind: LaunchArtifactKind, *, side: RunSide, repeat: int
    ) -> str | None:
        return self.get_artifact(experiment_id, kind, launch_seq(side, repeat))

    def launch_artifacts(self: _Artifacts, experiment_id: str, kind: LaunchArtifactKind) -> list[LaunchArtifact]:
        """Every launch's `kind`, in (repeat, side) order."""
        return [
            LaunchArtifact(kind=kind, side=side, repeat=repeat, content=content)
            for k, seq, content in self.list_artifacts(experiment_id)
            if k == kind
            for side, repeat in (launch_key(seq),)
        ]

    def record_launch_time(self: _Artifacts, experiment_id: str, time: LaunchTime) -> None:
        """Node seconds always (a launch that cost nothing says so); queue seconds when it waited."""
        seq = launch_seq(time.side, time.repeat)
        self.record_artifact(experiment_id, "node_seconds", seconds_text(time.node_seconds), seq=seq)
        if time.queue_seconds:
            self.record_artifact(experiment_id, "queue_seconds", seconds_text(time.queue_seconds), seq=seq)

    def launch_times(self: _Artifacts, experiment_id: str) -> list[LaunchTime]:
        """Each launch that recorded its node time, in (repeat, side) order."""
        node: dict[int, float] = {}
        queue: dict[int, float] = {}
        for kind, seq, content in self.list_artifacts(experiment_id):
            if kind == "node_seconds":
                node[seq] = float(content)
            elif kind == "queue_seconds":
                queue[seq] = float(content)
        return [
            LaunchTime(side=side, repeat=repeat, node_seconds=node.get(seq, 0.0), queue_seconds=queue.get(seq, 0.0))
            for seq in sorted(node.keys() | queue.keys())
            for side, repeat in (launch_key(seq),)
        ]
