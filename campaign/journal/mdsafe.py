"""Markdown escaping for text the journal did not write itself.

Model-written analysis, hypothesis names, log lines and reasons end up in a document a
person reviews.  Such text must not be able to change the document's structure (fake
headings, tables, notes-block markers, code fences), hide text (HTML comments, link
reference definitions, bidi overrides) or smuggle links, yet it should stay readable.
`Md` marks strings that are already safe Markdown so templates can tell them apart.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["Md", "blockquote", "cell", "code", "code_block", "paragraphs", "slug", "text"]


class Md(str):
    """A string that is already safe Markdown: emitted verbatim by the journal template."""


_THEMATIC_OR_SETEXT = re.compile(r"^\s*([-=*_+~])(\s*\1)+\s*$")
_FENCE_START = re.compile(r"^(\s*)(`{3,}|~{3,})")
_LIST_ORDERED = re.compile(r"^(\s*)(\d{1,9})([.)])(\s)")
_BACKTICK_RUN = re.compile(r"`+")


def _newlines(s: str) -> str:
    return s.replace("\r\n", "\n").replace("\r", "\n")


_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # category Cc without \n and \t


def _visible_controls(s: str) -> str:
    """Replace control and format characters (bidi overrides, zero-width joiners, NUL...)
    by a visible code point name, so they cannot reorder or hide text."""
    if s.isascii():  # the common case, without a loop per character (1,000-experiment journals)
        return _ASCII_CONTROLS.sub(lambda m: f"(U+{ord(m.group()):04X})", s)
    out = []
    for ch in s:
        if ch in "\n\t":
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            out.append(f"(U+{ord(ch):04X})")
        else:
            out.append(ch)
    return "".join(out)


_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _escape_inline(s: str) -> str:
    """Escape what opens HTML (tags, comments, autolinks), entities, links, images, tables
    and code spans.  A lone `>` or `&` cannot open anything and stays readable."""
    s = s.replace("\\", "\\\\")
    s = _ENTITY.sub("&amp;", s).replace("<", "&lt;")
    s = s.replace("[", "\\[").replace("]", "\\]").replace("|", "\\|").replace("`", "\\`")
    return s


def _escape_line_start(line: str) -> str:
    """Neutralize what only matters at the start of a line: headings, fences, rules,
    setext underlines, ordered-list numbers that would renumber, and indented code."""
    stripped = line.lstrip(" ")
    indent = len(line) - len(stripped)
    if indent >= 4:  # would become an indented code block: keep the text, drop the indent
        line, indent = stripped, 0
    if stripped.startswith(">"):
        return line[:indent] + "&gt;" + stripped[1:]
    if stripped.startswith("#"):
        return line[:indent] + "\\" + stripped
    if _THEMATIC_OR_SETEXT.match(line) or _FENCE_START.match(line):
        return line[:indent] + "\\" + stripped
    if stripped[:1] in ("+", "-", "*") and stripped[1:2] in ("", " "):
        return line[:indent] + "\\" + stripped
    m = _LIST_ORDERED.match(line)
    if m:
        return f"{m.group(1)}{m.group(2)}\\{m.group(3)}{m.group(4)}{line[m.end() :]}"
    return line


def _one_line(value: object) -> str:
    s = _visible_controls(_newlines(str(value))).replace("\t", " ")
    return " ".join(part.strip() for part in s.split("\n") if part.strip()) if "\n" in s else s


def text(value: object) -> Md:
    """Escape untrusted text for one line of Markdown prose (newlines become spaces)."""
    return Md(_escape_line_start(_escape_inline(_one_line(value))))


_PLAIN_CELL = re.compile(r"[A-Za-z0-9 .,:;+\-%=/()]*[A-Za-z0-9.%)]\Z")  # nothing to escape: numbers, words


def cell(value: object) -> Md:
    """Escape untrusted text for a table cell: one line, pipes escaped, never empty.
    Block syntax (headings, lists) means nothing inside a cell, so it is left alone."""
    plain = value if isinstance(value, str) else str(value)
    if _PLAIN_CELL.match(plain):  # most cells of a 1,000-experiment journal are figures
        return Md(plain)
    s = _escape_inline(_one_line(value))
    return Md(s if s.strip() else "-")


def paragraphs(value: object, *, limit: int = 6000) -> Md:
    """Escape multi-line untrusted text, keeping its line breaks and blank-line paragraphs."""
    s = _visible_controls(_newlines(str(value))).replace("\t", "    ")
    if len(s) > limit:
        s = s[:limit] + f" ... (truncated, {len(s) - limit} more characters)"
    lines = [_escape_line_start(_escape_inline(line.rstrip())) for line in s.split("\n")]
    out: list[str] = []
    for line in lines:
        if not line.strip():
            if out and out[-1] != "":
                out.append("")
            continue
        out.append(line)
    while out and out[-1] == "":
        out.pop()
    # a hard line break keeps the author's lines apart without merging them into one
    return Md("\n".join(ln + ("  " if ln and i + 1 < len(out) and out[i + 1] else "") for i, ln in enumerate(out)))


def blockquote(value: object, *, limit: int = 6000) -> Md:
    """Untrusted multi-line text as a Markdown blockquote (every line prefixed)."""
    body = paragraphs(value, limit=limit)
    return Md("\n".join(("> " + ln) if ln else ">" for ln in body.split("\n")))


def code(value: object, *, in_table: bool = False) -> Md:
    """An inline code span that no backtick run inside the value can close early."""
    s = _visible_controls(_newlines(str(value)).replace("\n", " "))
    longest = max((len(m) for m in _BACKTICK_RUN.findall(s)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    span = f"{ticks}{pad}{s}{pad}{ticks}"
    return Md(span.replace("|", "\\|") if in_table else span)


def code_block(lines: list[str] | str, *, info: str = "text") -> Md:
    """A fenced code block whose fence is longer than any backtick run in the content,
    so a log line such as ``` cannot end it early."""
    body = lines if isinstance(lines, str) else "\n".join(str(x) for x in lines)
    body = _visible_controls(_newlines(body)).rstrip("\n")
    longest = max((len(m) for m in _BACKTICK_RUN.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return Md(f"{fence}{info}\n{body}\n{fence}")


def slug(value: object, *, max_len: int = 60) -> str:
    """A lowercase anchor/key: letters, digits and single dashes; never empty."""
    s = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode()
    s = re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:max_len].strip("-")
    return s or "x"
