"""The continuous-batching scheduler core, pure and clock-free.

Both the HTTP server (which sleeps for each step in wall time) and the noise-free
ground truth (`perfmodel.expected_output_tps`) drive this same object, so what the
tests compute is what the server does.  SGLang policy: a prefill batch runs whenever
waiting requests fit (KV reservation, running cap, chunked-prefill budget), otherwise
one decode step (or speculative cycle) serves every running request.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol


class StepCosts(Protocol):
    def prefill_s(self, new_tokens: int, seqs: int, ctx_tokens: int) -> float: ...

    def decode_s(self, batch: int, ctx_tokens: int) -> float: ...


@dataclass(eq=False)
class Seq:
    """One request as the scheduler sees it."""

    rid: int
    prompt_tokens: int
    max_tokens: int
    tokens_per_step: float = 1.0  # mean accepted tokens per decode step (speculation)
    cached_tokens: int = 0  # prompt tokens served by the prefix cache
    prefilled: int = 0
    generated: int = 0
    carry: float = 0.0
    payload: object = None  # the server hangs its stream state here

    @property
    def reserve(self) -> int:
        return self.prompt_tokens + self.max_tokens

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass
class Step:
    kind: str  # "prefill" | "decode"
    duration_s: float
    chunks: list[tuple[Seq, int]] = field(default_factory=list)  # prefill: (seq, tokens this chunk)
    batch: list[Seq] = field(default_factory=list)  # decode: the running batch
    cached_tokens: int = 0


class BatchCore:
    def __init__(
        self, costs: StepCosts, *, kv_capacity_tokens: int, max_running: int, chunked_prefill_size: int
    ) -> None:
        self.costs = costs
        self.kv_capacity = kv_capacity_tokens
        self.max_running = max_running
        self.chunk = max(1, chunked_prefill_size)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.partial: Seq | None = None  # the one request whose prefill is chunked
        self.kv_reserved = 0

    def submit(self, seq: Seq) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Seq) -> None:
        """Drop a request (client went away): frees its reservation."""
        if seq in self.waiting:
            self.waiting.remove(seq)
            return
        if seq is self.partial:
            self.partial = None
        elif seq in self.running:
            self.running.remove(seq)
        else:
            return
        self.kv_reserved -= seq.reserve

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running and self.partial is None

    def plan(self) -> Step | None:
        step = self._plan_prefill()
        if step is not None:
            return step
        if not self.running:
            return None
        ctx = sum(s.context for s in self.running)
        return Step("decode", self.costs.decode_s(len(self.running), ctx), batch=list(self.running))

    def _plan_prefill(self) -> Step | None:
        budget = self.chunk
        chunks: list[tuple[Seq, int]] = []
        cached = 0
        if self.partial is not None:
            seq = self.partial
            n = min(budget, seq.prompt_tokens - seq.prefilled)
            chunks.append((seq, n))
            budget -= n
        reserved = self.kv_reserved
        active = len(self.running) + (1 if self.partial is not None else 0)
        while self.waiting and budget > 0 and active < self.max_running:
            seq = self.waiting[0]
            if reserved + seq.reserve > self.kv_capacity and (active > 0 or chunks):
                break
            self.waiting.popleft()
            reserved += seq.reserve
            active += 1
            seq.prefilled = min(seq.cached_tokens, seq.prompt_tokens - 1)
            cached += seq.prefilled
            n = min(budget, seq.prompt_tokens - seq.prefilled)
            chunks.append((seq, n))
            budget -= n
        if not chunks:
            return None
        self.kv_reserved = reserved
        new_tokens = sum(n for _, n in chunks)
        ctx = sum(s.prefilled + n for s, n in chunks)
        duration = self.costs.prefill_s(new_tokens, len(chunks), ctx)
        return Step("prefill", duration, chunks=chunks, cached_tokens=cached)

    def commit(self, step: Step) -> list[tuple[Seq, int, bool]]:
        """Apply a planned step; returns (seq, new output tokens, finished) per touched seq."""
        out: list[tuple[Seq, int, bool]] = []
        if step.kind == "prefill":
            self.partial = None
            for seq, n in step.chunks:
                seq.prefilled += n
                if seq.prefilled < seq.prompt_tokens:
                    self.partial = seq
                    continue
                seq.generated = 1
                done = seq.generated >= seq.max_tokens
                out.append((seq, 1, done))
                if done:
                    self.kv_reserved -= seq.reserve
                else:
                    self.running.append(seq)
            return out
        still: list[Seq] = []
        current = set(self.running)
        for seq in step.batch:
            if seq not in current:  # aborted while the step ran
                continue
            seq.carry += seq.tokens_per_step
            n = int(seq.carry)
            seq.carry -= n
            n = min(n, seq.max_tokens - seq.generated)
            seq.generated += n
            done = seq.generated >= seq.max_tokens
            out.append((seq, n, done))
            if done:
                self.kv_reserved -= seq.reserve
            else:
                still.append(seq)
        running_set = set(step.batch)
        self.running = still + [s for s in self.running if s not in running_set]
        return out
