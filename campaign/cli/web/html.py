"""The journal's Markdown as HTML: one source (the journal's section code), two outputs.

The Markdown the journal renders already escapes every piece of text it did not write
(`campaign.journal.mdsafe`); markdown-it converts it with raw HTML turned off, so even a
string that slipped through would be shown as text, never parsed as markup, and its link
validation drops `javascript:` and `data:` URLs.  What only makes sense in a file a
person edits (the notes-block markers, the anchors for in-file links) is taken out first.
The folded blocks the journal writes itself (`<details><summary>...</summary>` and
`</details>`, each alone on its line outside a code block) become real HTML, their
summary rendered as inline Markdown (escaped like any other text).
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

__all__ = ["journal_html"]

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")

# lines the journal writes itself, whole: model text cannot produce them outside a code
# block (mdsafe escapes `<`), and inside one (a log excerpt) they are evidence, kept
_FILE_ONLY = re.compile(
    r"^(<!-- notes:[a-z0-9-]+(?: campaign:\S+)? -->|<!-- /notes:[a-z0-9-]+ -->"
    r"|<a id=\"[a-z0-9-]+\"></a>)[ \t]*$"
)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DETAILS_OPEN = re.compile(r"^<details><summary>(.*)</summary>[ \t]*$")
_DETAILS_CLOSE = re.compile(r"^</details>[ \t]*$")
# a line that stands for an opened or closed folded block until the Markdown is rendered
_OPEN, _CLOSE = "\x00details-open\x00", "\x00details-close\x00"
# the journal file's last line says how to edit it; the web page says what it is in its own footer
_FILE_FOOTER = re.compile(r"\n---\n_generated from [^\n]*_\n*\Z")


def _web_lines(markdown: str) -> str:
    """The Markdown without the file-only lines, and without a section they left empty
    (the notes section); code blocks are passed through untouched."""
    out: list[str] = []
    fence: str | None = None
    heading: int | None = None  # index in `out` of the last section heading with nothing under it yet
    for line in markdown.split("\n"):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            out.append(line)
            continue
        if _FILE_ONLY.match(line):
            continue
        opened = _DETAILS_OPEN.match(line)
        if opened or _DETAILS_CLOSE.match(line):
            heading = None
            out.append(f"{_OPEN}{opened.group(1)}" if opened else _CLOSE)
            continue
        if line.startswith("## "):
            if heading is not None:
                del out[heading:]
            heading = len(out)
        elif line.strip():
            heading = None
            m = _FENCE.match(line)
            fence = m.group(1) if m else None
        out.append(line)
    if heading is not None:
        del out[heading:]
    return "\n".join(out)


def journal_html(markdown: str) -> str:
    """HTML of a journal page or section (no notes blocks: those live in the journal file)."""
    html: list[str] = []
    chunk: list[str] = []
    for line in _web_lines(_FILE_FOOTER.sub("\n", markdown)).split("\n"):
        if line.startswith(_OPEN) or line == _CLOSE:
            html.append(str(_MD.render("\n".join(chunk))))
            chunk = []
            html.append(
                f"<details><summary>{_MD.renderInline(line[len(_OPEN) :])}</summary>\n"
                if line.startswith(_OPEN)
                else "</details>\n"
            )
        else:
            chunk.append(line)
    html.append(str(_MD.render("\n".join(chunk))))
    return "".join(html)
