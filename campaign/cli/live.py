"""The live view while a campaign runs: one line per event, a spinner for the step in hand.

Part of the CLI layer (the only layer that prints).  Nodes emit events through
`Deps.events`; this turns them into what a person watching the terminal needs:
current hypothesis, server start, sweep progress, verdicts.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.status import Status

_STYLE = {"win": "bold green", "dead_end": "bold red", "inconclusive": "bold yellow"}
_MARK = {"win": "WIN", "dead_end": "DEAD END", "inconclusive": "INCONCLUSIVE"}


class LiveView:
    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.status: Status | None = None
        self.t0 = time.monotonic()

    def _spin(self, text: str) -> None:
        if self.quiet or not self.console.is_terminal:
            return
        if self.status is None:
            self.status = self.console.status(text)
            self.status.start()
        else:
            self.status.update(text)

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def _line(self, text: str) -> None:
        if not self.quiet:
            stamp = f"[dim]{time.monotonic() - self.t0:7.1f}s[/dim] "
            self.console.print(stamp + text, highlight=False)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "hypothesis":
            self._line(f"[bold]hypothesis[/bold] {data['name']} (attempt {data.get('attempt', 1)}): "
                       f"[dim]{data.get('rationale', '')}[/dim]")
        elif kind == "baseline":
            self._line(f"[bold]baseline[/bold] measuring ({data.get('reason')})")
        elif kind == "launch":
            self._spin(f"starting server for {data.get('label')} on {data.get('node', 'node')}")
        elif kind == "launch_failed":
            self._line(f"  server for {data.get('label')} failed to start: [red]{data.get('class')}[/red]")
        elif kind == "ready":
            self._spin(f"server {data.get('label')} ready at {data.get('url')}")
        elif kind == "sweep":
            self._spin(f"{data.get('label')}: sweeping {data.get('workload')}")
        elif kind == "level":
            ev = data.get("event")
            c = getattr(ev, "concurrency", None) if ev is not None else None
            if c is not None:
                done = getattr(ev, "completed", "")
                total = getattr(ev, "total", "")
                self._spin(f"sweep C={c} {done}/{total}")
        elif kind == "round":
            more = "another round" if data.get("more") else "enough to decide"
            self._line(f"  round {data['round']} of {data['hypothesis']} measured: {more}")
        elif kind == "verdict":
            k = data["kind"]
            cls = f" ({data['failure_class']})" if data.get("failure_class") else ""
            self._line(f"  [{_STYLE.get(k, 'bold')}]{_MARK.get(k, k)}{cls}[/] {data['hypothesis']}: {data['reason']}")
        elif kind == "environment":
            self._line(f"[bold magenta]environment[/bold magenta] {data['changed']}; "
                       f"re-opened: {', '.join(data.get('reopened') or []) or 'none'}")
