"""The journal's Markdown as HTML: one source (the journal's section code), two outputs.

The Markdown the journal renders already escapes every piece of text it did not write
(`campaign.journal.mdsafe`); markdown-it converts it with raw HTML turned off, so even a
string that slipped through would be shown as text, never parsed as markup, and its link
validation drops `javascript:` and `data:` URLs.  What only makes sense in a file a
person edits (the notes-block markers, the anchors for in-file links) is taken out first.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

__all__ = ["journal_html"]

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")

# lines the journal writes itself, whole: model text cannot produce them outside a code
# block (mdsafe escapes `<`), and inside one (a log excerpt) they are evidence, kept
_FILE_ONLY = re.compile(r"^(<!-- /?notes:[a-z0-9-]+ -->|<a id=\"[a-z0-9-]+\"></a>)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
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
    return str(_MD.render(_web_lines(_FILE_FOOTER.sub("\n", markdown))))
