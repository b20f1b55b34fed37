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

# lines the journal writes itself, whole: model text cannot produce them (mdsafe escapes `<`)
_FILE_ONLY = re.compile(r"^(<!-- /?notes:[a-z0-9-]+ -->|<a id=\"[a-z0-9-]+\"></a>)[ \t]*$", re.MULTILINE)
_EMPTY_SECTION = re.compile(r"^## [^\n]+\n\s*(?=^## |\Z)", re.MULTILINE)
_NOTES_LABEL = re.compile(r"^\*\*Notes:\*\*\s*$", re.MULTILINE)
# the journal file's last line says how to edit it; the web page says what it is in its own footer
_FILE_FOOTER = re.compile(r"\n---\n_generated from [^\n]*_\n*\Z")


def journal_html(markdown: str) -> str:
    """HTML of a journal page or section (no notes blocks: those live in the journal file)."""
    text = _FILE_FOOTER.sub("\n", _NOTES_LABEL.sub("", _FILE_ONLY.sub("", markdown)))
    text = _EMPTY_SECTION.sub("", text)
    return str(_MD.render(text))
