"""The live view while a campaign runs: one line per event, a spinner for the step in hand.

Part of the CLI layer (the only layer that prints).  Nodes emit events through
`Deps.events`; this turns them into what a person watching the terminal needs:
current hypothesis, server start, sweep progress, verdicts.  Event values are
record and model text: shown through `campaign.cli.plain`, never as markup.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from campaign.cli.plain import failure_lines, line

_STYLE = {"win": "bold green", "dead_end": "bold red", "inconclusive": "bold yellow"}
_MARK = {"win": "WIN", "dead_end": "DEAD END", "inconclusive": "INCONCLUSIVE"}


class LiveView:
    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.status: Status | None = None
        self.t0 = time.monotonic()

    def _spin(self, text: Text) -> None:
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

    def _line(self, text: Text) -> None:
        if not self.quiet:
            stamp = Text(f"{time.monotonic() - self.t0:7.1f}s ", style="dim")
            self.console.print(stamp + text, highlight=False)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        """One event; every value from the record or a model goes through `plain` (never markup)."""
        g = data.get
        if kind == "hypothesis":
            self._line(line(("hypothesis", "bold"), " ", (g("name"), ""), f" (attempt {g('attempt', 1)}): ",
                            (g("rationale", ""), "dim")))
        elif kind == "baseline":
            self._line(line(("baseline", "bold"), " measuring (", (g("reason"), ""), ")"))
        elif kind == "launch":
            self._spin(line("starting server for ", (g("label"), ""), " on ", (g("node", "node"), "")))
        elif kind == "launch_failed":
            self._line(line("  server for ", (g("label"), ""), " failed to start: ", (g("class"), "red"), " ",
                            (g("summary") or "", "")))
            for text in failure_lines(g("lines") or [], g("log_path")):
                self._line(line("    ", (text, "dim")))
        elif kind == "ready":
            self._spin(line("server ", (g("label"), ""), " ready at ", (g("url"), "")))
        elif kind == "sweep":
            self._spin(line((g("label"), ""), ": sweeping ", (g("workload"), "")))
        elif kind == "level":
            ev = g("event")
            c = getattr(ev, "concurrency", None) if ev is not None else None
            if c is not None:
                self._spin(line(f"sweep C={c} ", (getattr(ev, "completed", ""), ""), "/",
                                (getattr(ev, "total", ""), "")))
        elif kind == "round":
            more = "another round" if g("more") else "enough to decide"
            self._line(line(f"  round {g('round')} of ", (g("hypothesis"), ""), f" measured: {more}"))
        elif kind == "verdict":
            k = str(g("kind"))
            cls = f" ({g('failure_class')})" if g("failure_class") else ""
            self._line(line("  ", (f"{_MARK.get(k, k)}{cls}", _STYLE.get(k, "bold")), " ", (g("hypothesis"), ""),
                            ": ", (g("reason"), "")))
        elif kind == "environment":
            self._line(line(("environment", "bold magenta"), " ", (g("changed"), ""), "; re-opened: ",
                            (", ".join(str(x) for x in g("reopened") or []) or "none", "")))
