"""The live view while a campaign runs: one line per event, and on a terminal a status
line for the step in hand.

Part of the CLI layer (the only layer that prints).  Nodes emit events through
`Deps.events`; this turns them into what a person watching needs: the current
hypothesis, round k of at most N, the last level's figures (tok/s, TTFT p50), node
time used and what the playbook's max_hours leaves.  Not a terminal: the same as plain
lines, never hard-wrapped.  Event values are record and model text: shown through
`campaign.cli.plain`, never as markup.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from campaign.cli.plain import console as stderr_console
from campaign.cli.plain import failure_lines, line
from campaign.journal.format import fmt_duration

_STYLE = {"win": "bold green", "dead_end": "bold red", "inconclusive": "bold yellow"}
_MARK = {"win": "WIN", "dead_end": "DEAD END", "inconclusive": "INCONCLUSIVE"}


class LiveView:
    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or stderr_console(stderr=True)
        self.console.soft_wrap = True  # a long line is one line: the terminal wraps it, a log keeps it whole
        self.quiet = quiet
        self.status: Status | None = None
        self.t0 = time.monotonic()
        # what the status line and each round's line show ("campaign" event: the playbook's limits)
        self.hypothesis = ""
        self.round = 0  # rounds measured of the current hypothesis
        self.max_rounds: int | None = None
        self.max_hours: float | None = None
        self.time_scale = 1.0
        self.before_s = 0.0  # node time the campaign had used when this process started
        self.last = ""  # "candidate parallel C=70: 578.3 tok/s, TTFT p50 312 ms"
        self.workload = ""
        self.side = ""  # the side the sweep in hand measures

    def node_time(self) -> str:
        """'node time about 1h 54m of 48h (about 46h 06m left)': wall time since this
        process started, at the node's time scale, on top of what was recorded before."""
        used = self.before_s + (time.monotonic() - self.t0) * self.time_scale
        out = f"node time about {fmt_duration(used)}"
        if self.max_hours:
            left = max(0.0, self.max_hours * 3600 - used)
            out += f" of {self.max_hours:g}h (about {fmt_duration(left)} left)"
        return out

    def where(self) -> Text:
        """Hypothesis, round k of at most N, the last level's figures, node time."""
        parts: list[str | tuple[object, str] | Text] = []
        if self.hypothesis:
            at_most = f" of at most {self.max_rounds}" if self.max_rounds else ""
            parts += [(self.hypothesis, "bold"), f" · round {self.round + 1}{at_most}"]
        if self.last:
            parts += [" · last level ", (self.last, "")]
        parts += [" · " if parts else "", self.node_time()]
        return line(*parts)

    def _spin(self, text: Text) -> None:
        if self.quiet or not self.console.is_terminal:
            return
        text = self.where() + Text(" · ") + text
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
        if kind == "campaign":
            self.max_rounds, self.max_hours = g("max_rounds"), g("max_hours")
            self.time_scale, self.before_s = float(g("time_scale") or 1.0), float(g("node_seconds") or 0.0)
            self.t0 = time.monotonic()
        elif kind == "hypothesis":
            self.hypothesis, self.round, self.last = str(g("name")), 0, ""
            self._line(
                line(
                    ("hypothesis", "bold"),
                    " ",
                    (g("name"), ""),
                    f" (attempt {g('attempt', 1)}): ",
                    (g("rationale", ""), "dim"),
                )
            )
        elif kind == "baseline":
            self._line(line(("baseline", "bold"), " measuring (", (g("reason"), ""), ")"))
        elif kind == "launch":
            self._spin(line("starting server for ", (g("label"), ""), " on ", (g("node", "node"), "")))
        elif kind == "launch_failed":
            self._line(
                line(
                    "  server for ",
                    (g("label"), ""),
                    " failed to start: ",
                    (g("class"), "red"),
                    " ",
                    (g("summary") or "", ""),
                )
            )
            for text in failure_lines(g("lines") or [], g("log_path")):
                self._line(line("    ", (text, "dim")))
        elif kind == "ready":
            self._spin(line("server ", (g("label"), ""), " ready at ", (g("url"), "")))
        elif kind == "sweep":
            self.workload = str(g("workload") or "")
            parts = str(g("label") or "").rsplit("-", 2)  # "{hypothesis}-{side}-r{k}" or "baseline{n}-r{k}"
            self.side = parts[1] if len(parts) == 3 and parts[1] in ("baseline", "candidate") else "baseline"
            self._spin(line((g("label"), ""), ": sweeping ", (g("workload"), "")))
        elif kind == "level":
            ev = g("event")
            c = getattr(ev, "concurrency", None) if ev is not None else None
            if c is not None:
                self._level_done(ev)
                self._spin(
                    line(f"sweep C={c} ", (getattr(ev, "completed", ""), ""), "/", (getattr(ev, "total", ""), ""))
                )
        elif kind == "round":
            self.round = int(g("round") or 0)
            more = "another round" if g("more") else "enough to decide"
            at_most = f" (at most {self.max_rounds})" if self.max_rounds else ""
            last: list[str | tuple[object, str] | Text] = [" · last level ", (self.last, "")] if self.last else []
            self._line(
                line(
                    f"  round {g('round')}{at_most} of ",
                    (g("hypothesis"), ""),
                    f" measured: {more}",
                    *last,
                    " · ",
                    self.node_time(),
                )
            )
        elif kind == "verdict":
            k = str(g("kind"))
            cls = f" ({g('failure_class')})" if g("failure_class") else ""
            self._line(
                line(
                    "  ",
                    (f"{_MARK.get(k, k)}{cls}", _STYLE.get(k, "bold")),
                    " ",
                    (g("hypothesis"), ""),
                    ": ",
                    (g("reason"), ""),
                )
            )
        elif kind == "environment":
            self._line(
                line(
                    ("environment", "bold magenta"),
                    " ",
                    (g("changed"), ""),
                    "; re-opened: ",
                    (", ".join(str(x) for x in g("reopened") or []) or "none", ""),
                )
            )

    def _level_done(self, ev: Any) -> None:
        """A finished level's figures: tok/s, and TTFT p50 where the sweep measured it."""
        level = getattr(ev, "level", None)
        if getattr(ev, "phase", "") != "level_done" or level is None:
            return
        ttft = getattr(getattr(level, "ttft_ms", None), "p50", 0.0) or 0.0
        self.last = (
            f"{self.side + ' ' if self.side else ''}{self.workload + ' ' if self.workload else ''}"
            f"C={ev.concurrency}: "
            f"{level.output_tokens_per_s:.1f} tok/s" + (f", TTFT p50 {ttft:.0f} ms" if ttft else "")
        )
