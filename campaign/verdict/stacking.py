"""Stacked wins: do adopted wins add up, and if not, which two of them interact?

Independent speed-ups multiply: +9% and +5% stack to (1.09 * 1.05 - 1) = +14.45%.  A
stack that falls short of that product hides an interaction.  Assuming interactions
come in pairs (a subset falls short iff it contains an interacting pair), the pair is
found by bisection: the shortest failing prefix ends at the pair's later member j, the
shortest failing window ending at j starts at its earlier member i - 2*ceil(log2 n)
measurements, plus one to confirm the pair alone when the window is wider than it.

The planner is a serializable state machine (a graph node can checkpoint it): ask
`next_subset()`, measure that subset of wins stacked on the base config, `record()`
the measured delta, repeat until `next_subset()` is None, then read `result`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from typing import Literal

from pydantic import BaseModel, Field, model_validator


def expected_stack_delta(part_deltas_pct: Sequence[float]) -> float:
    """delta% of all parts together if they are independent: the product of ratios."""
    return (math.prod(1.0 + d / 100.0 for d in part_deltas_pct) - 1.0) * 100.0


def stack_shortfall(expected_pct: float, measured_pct: float, noise_pct: float) -> bool:
    """True when the measured stack falls short of the expected one by more than
    `noise_pct` (relative to the expected throughput)."""
    if expected_pct <= -100.0:
        return False
    return (1.0 + measured_pct / 100.0) / (1.0 + expected_pct / 100.0) - 1.0 < -noise_pct / 100.0


class Measurement(BaseModel):
    subset: list[str]
    expected_pct: float
    measured_pct: float
    shortfall: bool


class InteractionResult(BaseModel):
    pair: tuple[str, str] | None = None  # the interacting pair, confirmed alone
    group: list[str] = Field(default_factory=list)  # smallest failing window found
    measurements: int = 0
    explanation: str = ""


class BisectionState(BaseModel):
    """Where the search stands.  Indices are positions in `wins` (adoption order)."""

    wins: list[str]
    part_deltas_pct: list[float]
    noise_pct: float
    phase: Literal["full", "prefix", "window", "confirm", "done"] = "full"
    lo: int = 0
    hi: int = 0
    j: int | None = None
    i: int | None = None
    history: list[Measurement] = Field(default_factory=list)
    result: InteractionResult | None = None

    @model_validator(mode="after")
    def _same_length(self) -> BisectionState:
        if len(self.wins) != len(self.part_deltas_pct):
            raise ValueError("wins and part_deltas_pct must have the same length")
        return self

    # ----------------------------------------------------------------- queries
    def _indices(self) -> list[int]:
        if self.phase == "full":
            return list(range(len(self.wins)))
        if self.phase == "prefix":
            return list(range((self.lo + self.hi) // 2))
        if self.phase == "window":
            assert self.j is not None
            return list(range((self.lo + self.hi + 1) // 2, self.j + 1))
        if self.phase == "confirm":
            assert self.i is not None and self.j is not None
            return [self.i, self.j]
        return []

    def next_subset(self) -> list[str] | None:
        """The wins to stack for the next measurement; None when the search is over."""
        if self.phase == "done":
            return None
        return [self.wins[k] for k in self._indices()]

    # ------------------------------------------------------------------ update
    def record(self, measured_pct: float) -> BisectionState:
        """A new state that knows the measured delta of `next_subset()`."""
        if self.phase == "done":
            raise ValueError("the bisection is finished: nothing to record")
        idx = self._indices()
        expected = expected_stack_delta([self.part_deltas_pct[k] for k in idx])
        short = stack_shortfall(expected, measured_pct, self.noise_pct)
        m = Measurement(
            subset=[self.wins[k] for k in idx], expected_pct=expected, measured_pct=measured_pct, shortfall=short
        )
        s = self.model_copy(update={"history": [*self.history, m]}, deep=True)
        if s.phase == "full":
            if not short:
                return s._finish(None, [], "the stack adds up: no interaction beyond noise")
            return s._start_prefix()
        if s.phase == "prefix":
            mid = (s.lo + s.hi) // 2
            s.hi, s.lo = (mid, s.lo) if short else (s.hi, mid + 1)
            return s._after_prefix()
        if s.phase == "window":
            mid = (s.lo + s.hi + 1) // 2
            s.lo, s.hi = (mid, s.hi) if short else (s.lo, mid - 1)
            return s._after_window()
        assert s.i is not None and s.j is not None
        window = s.wins[s.i : s.j + 1]
        if short:
            return s._finish((s.wins[s.i], s.wins[s.j]), window, f"{s.wins[s.i]} and {s.wins[s.j]} interact")
        return s._finish(None, window, f"no single pair: {', '.join(window)} interact together")

    def _start_prefix(self) -> BisectionState:
        self.phase, self.lo, self.hi = "prefix", 2, len(self.wins)
        return self._after_prefix()

    def _after_prefix(self) -> BisectionState:
        if self.lo < self.hi:
            return self
        self.j = self.lo - 1
        self.phase, self.lo, self.hi = "window", 0, self.j - 1
        return self._after_window()

    def _after_window(self) -> BisectionState:
        if self.lo < self.hi:
            return self
        self.i = self.lo
        assert self.j is not None
        if self.j - self.i == 1:
            pair = (self.wins[self.i], self.wins[self.j])
            return self._finish(pair, list(pair), f"{pair[0]} and {pair[1]} interact")
        self.phase = "confirm"
        return self

    def _finish(self, pair: tuple[str, str] | None, group: list[str], why: str) -> BisectionState:
        self.phase = "done"
        self.result = InteractionResult(pair=pair, group=group, measurements=len(self.history), explanation=why)
        return self


def start_bisection(
    wins: Sequence[str],
    part_deltas_pct: Sequence[float],
    noise_pct: float,
    *,
    full_stack_delta_pct: float | None = None,
) -> BisectionState:
    """A fresh search; pass the already measured full stack to save one measurement."""
    state = BisectionState(wins=list(wins), part_deltas_pct=list(part_deltas_pct), noise_pct=noise_pct)
    if len(wins) < 2:
        return state._finish(None, [], "fewer than two wins: nothing can interact")
    if full_stack_delta_pct is not None:
        return state.record(full_stack_delta_pct)
    return state


def bisection_steps(
    wins: Sequence[str],
    part_deltas_pct: Sequence[float],
    noise_pct: float,
    *,
    full_stack_delta_pct: float | None = None,
) -> Generator[list[str], float, InteractionResult]:
    """Generator form: yields subsets, receives their measured deltas, returns the result."""
    state = start_bisection(wins, part_deltas_pct, noise_pct, full_stack_delta_pct=full_stack_delta_pct)
    while (subset := state.next_subset()) is not None:
        state = state.record((yield subset))
    assert state.result is not None
    return state.result


def find_interaction(
    wins: Sequence[str], part_deltas_pct: Sequence[float], noise_pct: float, measure: Callable[[list[str]], float]
) -> InteractionResult:
    """Drive the search with a callback that measures a subset's stacked delta."""
    state = start_bisection(wins, part_deltas_pct, noise_pct)
    while (subset := state.next_subset()) is not None:
        state = state.record(measure(subset))
    assert state.result is not None
    return state.result
