"""Untrusted text (model answers, log lines, reasons, names) for the terminal.

Rich reads `[...]` in a plain `str` as markup: `[/bold]` in a rationale raised
MarkupError and stopped the live view, on every resume.  Everything the campaign
did not write itself therefore reaches rich as a `Text` (never parsed as markup),
with control and format characters (ESC sequences, bidi overrides, zero-width
characters) shown as `(U+XXXX)`, so it can neither restyle nor reorder the screen.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text


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


def failure_lines(lines: list[str], log_path: object = None) -> list[str]:
    """A failed launch's deciding log lines (or its log's last lines), then where the log is."""
    out = [f"| {ln}" for ln in lines]
    if log_path:
        out.append(f"log: {log_path}")
    return out
