"""Untrusted text (model answers, log lines, reasons, names) for the terminal.

Rich reads `[...]` in a plain `str` as markup: `[/bold]` in a rationale raised
MarkupError and stopped the live view, on every resume.  Everything the campaign
did not write itself therefore reaches rich as a `Text` (never parsed as markup),
with control and format characters (ESC sequences, bidi overrides, zero-width
characters) shown as `(U+XXXX)`, so it can neither restyle nor reorder the screen.
"""

from __future__ import annotations

import os
import unicodedata
from typing import Any

from rich.console import Console
from rich.text import Text

#: the width of output that is not a terminal (a file, a pipe, a CI log): no line is cut
UNWRAPPED = 100_000


def visible(value: object, *, limit: int = 2000) -> str:
    """One line: newlines and tabs become spaces, other control/format characters visible."""
    out = []
    for ch in str(value)[:limit]:
        if ch in "\n\r\t":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            out.append(f"(U+{ord(ch):04X})")
        else:
            out.append(ch)
    return "".join(out)


def plain(value: object, style: str = "") -> Text:
    """`value` as a Text: shown exactly, never interpreted as markup."""
    return Text(visible(value), style=style)


def line(*parts: str | tuple[object, str] | Text) -> Text:
    """Join trusted literal strings with untrusted `(value, style)` pairs into one Text.

    Literal `str` parts are the CLI's own words (no markup is parsed in them either)."""
    out = Text()
    for part in parts:
        if isinstance(part, Text):
            out.append_text(part)
        elif isinstance(part, tuple):
            out.append_text(plain(part[0], part[1]))
        else:
            out.append(part)
    return out


def console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A Console that wraps at the terminal's width, and not at all when the output is a
    file or a pipe (rich's default there is 80 columns; COLUMNS still wins when set)."""
    con = Console(stderr=stderr, **kwargs)
    if not con.is_terminal and "COLUMNS" not in os.environ and "width" not in kwargs:
        con = Console(stderr=stderr, width=UNWRAPPED, **kwargs)
    return con


def failure_lines(lines: list[str], log_path: object = None) -> list[str]:
    """A failed launch's deciding log lines (or its log's last lines), then where the log is."""
    out = [f"| {ln}" for ln in lines]
    if log_path:
        out.append(f"log: {log_path}")
    return out
