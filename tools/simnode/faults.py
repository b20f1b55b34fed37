"""Injected node faults, for testing how a campaign survives a misbehaving node.

Real nodes crash mid-sweep, hang (alive, no tokens), answer HTTP 500 or drop off the
network.  The simulated node reproduces each on demand, read from its environment so
a test (or one hypothesis's `env:`) can arm it:

    SIMNODE_FAULT="crash_after:N,hang_after:N,http500_rate:X,unreachable_after:N"
    SIMNODE_FAULT_ONCE=/path/marker   # optional: fire once; the marker disarms later launches

Counts are generation requests (completions and chat) received by this process;
`crash_after:3` serves three and dies on the fourth.  `decide` is pure, so the
schedule is tested with plain numbers; `FaultInjector` adds the counter and the
one-shot marker.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the server imports this module: its types only
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

    from tools.simnode.server import SimNode

FAULT_ENV = "SIMNODE_FAULT"
ONCE_ENV = "SIMNODE_FAULT_ONCE"

#: the log line a crash leaves: what SGLang's scheduler prints for a device fault.
CRASH_LINES = (
    "Scheduler hit an exception: Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "Received sigquit from a child process. It usually means the child failed.",
)


class Action(str, Enum):
    serve = "serve"
    crash = "crash"  # the process dies (idea fault: the config broke the server)
    hang = "hang"  # the request never produces a token; health still answers
    http500 = "http500"  # the request is answered with HTTP 500
    unreachable = "unreachable"  # the node stops answering on the network (infrastructure)


class FaultSpecError(ValueError):
    """A malformed SIMNODE_FAULT value (the server exits 2 naming it)."""


@dataclass(frozen=True)
class FaultPlan:
    crash_after: int | None = None
    hang_after: int | None = None
    http500_rate: float = 0.0
    unreachable_after: int | None = None

    @property
    def armed(self) -> bool:
        return (
            any(v is not None for v in (self.crash_after, self.hang_after, self.unreachable_after))
            or self.http500_rate > 0
        )


def parse_fault_spec(text: str) -> FaultPlan:
    """`crash_after:3,http500_rate:0.5` -> FaultPlan; FaultSpecError names the bad part."""
    counts: dict[str, int] = {}
    rate = 0.0
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition(":")
        name = name.strip()
        try:
            if name in ("crash_after", "hang_after", "unreachable_after") and sep:
                counts[name] = int(value)
                if counts[name] < 0:
                    raise ValueError
            elif name == "http500_rate" and sep:
                rate = float(value)
                if not 0.0 <= rate <= 1.0:
                    raise ValueError
            else:
                raise FaultSpecError(
                    f"{FAULT_ENV}: unknown fault {part!r} (use crash_after:N, hang_after:N, "
                    "http500_rate:X or unreachable_after:N)"
                )
        except ValueError as exc:
            if isinstance(exc, FaultSpecError):
                raise
            raise FaultSpecError(
                f"{FAULT_ENV}: bad value in {part!r} (counts are integers >= 0, the rate is between 0 and 1)"
            ) from None
    return FaultPlan(counts.get("crash_after"), counts.get("hang_after"), rate, counts.get("unreachable_after"))


def decide(plan: FaultPlan, n: int) -> Action:
    """What to do with the n-th generation request (1-based).  A crash or an outage
    wins over a hang, a hang over an HTTP 500; the 500s are spread evenly (request n
    fails when floor(n*rate) steps up), so a rate of 0.5 fails every second request."""
    if plan.crash_after is not None and n > plan.crash_after:
        return Action.crash
    if plan.unreachable_after is not None and n > plan.unreachable_after:
        return Action.unreachable
    if plan.hang_after is not None and n > plan.hang_after:
        return Action.hang
    if plan.http500_rate > 0 and int(n * plan.http500_rate) > int((n - 1) * plan.http500_rate):
        return Action.http500
    return Action.serve


class FaultInjector:
    """Counts generation requests and says what each should suffer.  Thread-safe."""

    def __init__(self, plan: FaultPlan, once_marker: str | None = None) -> None:
        self.plan = plan
        self.once_marker = Path(once_marker) if once_marker else None
        self._n = 0
        self._lock = threading.Lock()
        self._disarmed = self.once_marker is not None and self.once_marker.exists()
        self._fired = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaultInjector | None:
        env = os.environ if environ is None else environ
        text = env.get(FAULT_ENV, "").strip()
        if not text:
            return None
        return cls(parse_fault_spec(text), env.get(ONCE_ENV) or None)

    def on_request(self) -> Action:
        with self._lock:
            if self._disarmed:
                return Action.serve
            self._n += 1
            action = decide(self.plan, self._n)
            if action is not Action.serve and not self._fired:
                self._fired = True
                self._mark_fired()
            return action

    def _mark_fired(self) -> None:
        """The one-shot marker is written when the fault first fires, so the next launch
        (a retry) serves normally; this launch keeps misbehaving as it started."""
        if self.once_marker is None:
            return
        self.once_marker.parent.mkdir(parents=True, exist_ok=True)
        self.once_marker.write_text(f"fired in pid {os.getpid()}\n")


# ----------------------------------------------------------------- HTTP side (aiohttp)
async def inject(node: SimNode, request: web.Request) -> web.StreamResponse | None:
    """Called by a generation route before it serves: None to serve normally, else the
    response the fault gives (or never returns: a hang; or the process dies: a crash)."""
    import asyncio
    import signal

    from aiohttp import web

    injector: FaultInjector | None = getattr(node, "faults", None)
    action = injector.on_request() if injector is not None else Action.serve
    if action is Action.serve:
        return None
    if action is Action.crash:
        for line in CRASH_LINES:
            node.log.line(line, rank=0)
        os.kill(os.getpid(), signal.SIGKILL)  # as SGLang's kill_process_tree: in-flight streams break
    if action is Action.hang:
        node.log.line("Scheduler watchdog: no progress in the forward loop (injected hang)", rank=0)
        await asyncio.Event().wait()  # until the client gives up
    if action is Action.unreachable:
        node.unreachable = True
        request.transport.abort() if request.transport is not None else None
        raise ConnectionResetError("injected outage")
    return web.json_response(
        {
            "object": "error",
            "message": "Internal server error (injected fault)",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        },
        status=500,
    )


def outage_middleware(node: SimNode) -> Middleware:
    """Once the node is `unreachable`, every request (health included) loses its
    connection, as when the host drops off the network while the process lives on."""
    from aiohttp import web

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if getattr(node, "unreachable", False):
            if request.transport is not None:
                request.transport.abort()
            raise ConnectionResetError("injected outage")
        return await handler(request)

    return middleware
