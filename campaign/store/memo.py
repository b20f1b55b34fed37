"""Parsed records a Store has already decoded, keyed by what they were decoded from.

Why: the loop re-renders the journal after every verdict from the same Store, and an
incremental view still needs every experiment's record and every dead end's verdict
(the outline, the dead ends' revisit lists).  Decoding them again each time was most of
a per-verdict update at 1,000 experiments.  A record is keyed by the whole row it came
from (any changed column is a new key), a verdict by its experiment and the moment it
was recorded (a verdict is final once written; a rewrite has a new timestamp), so a
cached value is always what decoding the row again would give.

Values are shared between views: they are read, never changed, by the view builders.
Each cache is bounded; when full it starts over (a campaign that outgrows it pays the
decoding again, it never reads a stale value).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from threading import Lock
from typing import Any, Generic, TypeVar

from campaign.domain.records import BaselineView, Verdict
from campaign.store.records import ExperimentRecord, HypothesisRecord

__all__ = ["Memo", "ParseMemo"]

T = TypeVar("T")
LIMIT = 50_000  # entries per cache: about 10 campaigns of 5,000 experiments


class Memo(Generic[T]):
    """One bounded cache: key -> decoded value."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._values: dict[Hashable, T] = {}
        self._limit = limit
        self._lock = Lock()

    def get(self, key: Hashable, decode: Callable[[], T]) -> T:
        found = self._values.get(key)
        if found is not None:
            return found
        value = decode()
        with self._lock:
            if len(self._values) >= self._limit:
                self._values.clear()
            self._values[key] = value
        return value

    def peek(self, key: Hashable) -> T | None:
        return self._values.get(key)

    def __len__(self) -> int:
        return len(self._values)


class ParseMemo:
    """The caches one Store keeps: experiment records, outline verdicts, hypotheses."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.experiments: Memo[ExperimentRecord] = Memo(limit)
        self.verdicts: Memo[Verdict] = Memo(limit)  # outline verdicts (no per-level comparisons)
        self.hypotheses: Memo[HypothesisRecord] = Memo(limit)
        self.runs: Memo[Any] = Memo(limit)  # a baseline's rounds, keyed by (id, metric, each round's head)
        self.side_values: Memo[list[tuple[int, str, int, float]]] = Memo(limit)  # the noise model's reads, per blob
        # a baseline's view, by the identity of the record and rounds it was built from
        # (both held in the value, so an identity is never reused while it is cached)
        self.baseline_views: Memo[tuple[ExperimentRecord, Any, BaselineView]] = Memo(limit)
