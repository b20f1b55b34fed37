"""The asyncio continuous-batching loop: runs `BatchCore` steps in node time.

Each step's duration comes from the performance model times this launch's speed offset
(drawn once per launch by `SimNode`, shared by every request and concurrency level the
launch serves, as a real server's run-to-run offset is) times seeded per-step noise; the loop
sleeps until the step's wall deadline (node time / time scale) and then delivers the
tokens.  To stay cheap at high concurrency under a large time scale, consecutive
steps whose deadlines fall within one wall tick are computed back to back and their
tokens delivered together (first and last tokens are always delivered at their own
step), so per-step work stays O(batch).

The node keeps its own clock (`clock()`): it advances by each step's modelled duration,
so a step that ran late on a busy host CPU (the loop woke after its deadline) is not
longer in node time; while the node is idle the clock advances by the wall time that
passed, unscaled, since the gap between requests is the client's real time, not GPU
work.  Every streamed chunk carries that clock (`node_t0`: the request's arrival,
`node_t`: the chunk's step), and the load generator measures node time from it, so the
figures of a simulated node measure the model and its seeded noise, not the host's load.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from typing import cast

from tools.simnode import kernels
from tools.simnode.batchcore import BatchCore, Seq
from tools.simnode.nodelog import NodeLog
from tools.simnode.textgen import TextStream


@dataclass(eq=False)
class StreamState:
    """Tokens of one request waiting to be written to its client."""

    text: TextStream
    pending: int = 0  # generated, not yet delivered
    delivered: int = 0
    finished: bool = False
    first_token_node_s: float | None = None
    arrival_node_s: float = 0.0
    # (tokens, finished, node time of the step that produced them) ready for the handler
    chunks: list[tuple[int, bool, float]] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None


class SimEngine:
    def __init__(
        self,
        core: BatchCore,
        *,
        time_scale: float,
        noise_pct: float,
        rng: random.Random,
        log: NodeLog,
        stream_interval: int = 1,
        max_events_per_s: float = 6000.0,
        step_time_factor: float = 1.0,
    ) -> None:
        self.core = core
        self.scale = time_scale
        self.rng = rng
        self.sigma = noise_pct / 100.0
        self.offset = step_time_factor  # this launch's systematic speed (step time multiplier)
        self.log = log
        self.stream_interval = max(1, stream_interval)
        self.max_events_per_s = max_events_per_s
        self._wake = asyncio.Event()
        self._dirty: set[StreamState] = set()
        self.node_s = 0.0
        self._wall0 = 0.0
        self._idle_since: float | None = 0.0  # wall time the node went idle; None while busy
        self._step_node = 0.0  # node time at the start of the step in progress
        self._step_wall = 0.0
        self.steps = 0
        self.generated_tokens = 0
        self._last_log = 0.0

    def clock(self) -> float:
        """The node's time now (see the module docstring): while a step runs, its start
        plus the scaled wall time since, never past its end."""
        now = time.monotonic()
        if self._idle_since is not None:
            return self.node_s + (now - self._idle_since)
        return min(self.node_s, self._step_node + (now - self._step_wall) * self.scale)

    def _wake_from_idle(self) -> None:
        """Advance by the idle wall time and re-anchor deadlines at now, so lateness of the
        busy period before (a host stall) is neither charged to nor sprinted off later."""
        now = time.monotonic()
        if self._idle_since is not None:
            self.node_s += now - self._idle_since
        self._idle_since = None
        self._wall0 = now - self.node_s / self.scale

    def submit(self, seq: Seq) -> None:
        self.core.submit(seq)
        self._wake.set()

    def abort(self, seq: Seq) -> None:
        self.core.abort(seq)

    def _noise(self) -> float:
        if self.sigma <= 0:
            return self.offset
        return self.offset * math.exp(self.rng.gauss(0.0, self.sigma) - self.sigma**2 / 2)

    def _flush(self) -> None:
        for st in self._dirty:
            n = st.pending
            if st.finished or st.delivered == 0 or n >= self.stream_interval:
                st.pending = 0
                st.delivered += n
                st.chunks.append((n, st.finished, self.node_s))
                st.wake.set()
        self._dirty = {st for st in self._dirty if st.pending}

    async def run(self) -> None:
        self._wall0 = time.monotonic()
        self._idle_since = self._wall0
        last_flush_wall = self._wall0
        while True:
            if self.core.idle:
                if self._idle_since is None:
                    self._idle_since = time.monotonic()
                self._wake.clear()
                await self._wake.wait()
            step = self.core.plan()
            if step is None:
                if self._idle_since is None:
                    self._idle_since = time.monotonic()
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._idle_since is not None:
                self._wake_from_idle()
            if self.steps == 0:
                self._last_log = self.node_s
            self._step_node = self.node_s
            self._step_wall = self._wall0 + self.node_s / self.scale  # when it is due to start
            self.node_s += step.duration_s * kernels.STEP_TIME_FACTOR * self._noise()
            self.steps += 1
            urgent = step.kind == "prefill"
            for seq, n, done in self.core.commit(step):
                st = cast(StreamState, seq.payload)  # every sequence the engine admits carries one
                if st.first_token_node_s is None:
                    st.first_token_node_s = self.node_s
                st.pending += n
                st.finished = done
                self.generated_tokens += n
                urgent = urgent or done
                self._dirty.add(st)
            target = self._wall0 + self.node_s / self.scale
            tick = max(0.002, len(self.core.running) / self.max_events_per_s)
            if urgent or target - last_flush_wall >= tick:
                delay = target - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    await asyncio.sleep(0)
                self._flush()
                last_flush_wall = target
                self._maybe_log(step.kind)

    def _maybe_log(self, kind: str) -> None:
        """SGLang's periodic decode-batch line (every ~40 node seconds of serving)."""
        if self.node_s - self._last_log < 40.0 or kind != "decode":
            return
        span = self.node_s - self._last_log
        self._last_log = self.node_s
        core = self.core
        usage = core.kv_reserved / max(core.kv_capacity, 1)
        gen = self.generated_tokens / max(span, 1e-9)
        self.generated_tokens = 0
        self.log.line(
            f"Decode batch. #running-req: {len(core.running)}, #token: {core.kv_reserved}, token usage: "
            f"{usage:.2f}, cuda graph: {len(core.running) <= getattr(core.costs, 'graph_max_bs', 0)}, "
            f"gen throughput (token/s): {gen:.2f}, #queue-req: {len(core.waiting)}",
            rank=0,
        )
