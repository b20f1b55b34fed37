from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from campaign.journal import mdsafe
from campaign.journal.render import parse_notes


def test_html_comment_and_tags_cannot_open():
    s = mdsafe.text("<!-- notes:campaign --> <script>alert(1)</script> a > b & c &lt;")
    assert "<" not in s
    assert "&lt;!-- notes:campaign --" in s
    assert "a > b & c &amp;lt;" in s  # readable where harmless; an entity cannot be smuggled


def test_leading_heading_quote_rule_and_fence_are_neutralized():
    for hostile, expected in [
        ("# Fake heading", "\\# Fake heading"),
        ("> quoted", "&gt; quoted"),
        ("---", "\\---"),
        ("~~~python", "\\~~~python"),
        ("1. item", "1\\. item"),
    ]:
        assert mdsafe.text(hostile) == expected
    assert mdsafe.text("```bash") == "\\`\\`\\`bash"


def test_links_images_and_reference_definitions_are_inert():
    s = mdsafe.text("![x](http://evil/track.png) [click](javascript:alert(1)) [ref]: http://evil")
    assert "](" not in s.replace("\\](", "")
    assert "\\[click\\](javascript:alert(1))" in s


def test_cell_is_one_line_with_pipes_escaped_and_never_empty():
    s = mdsafe.cell("a | b\nsecond line\r\n| c")
    assert "\n" not in s and re.search(r"(?<!\\)\|", s) is None
    assert s == "a \\| b second line \\| c"
    assert mdsafe.cell("   ") == "-"


def test_bidi_and_zero_width_characters_become_visible():
    s = mdsafe.text("safe\u202eevil\u200bhidden\x00")
    assert "\u202e" not in s and "\u200b" not in s and "\x00" not in s
    assert "(U+202E)" in s and "(U+200B)" in s and "(U+0000)" in s


def test_code_span_and_block_cannot_be_closed_by_content():
    assert mdsafe.code("a``b") == "```a``b```"
    assert mdsafe.code("x|y", in_table=True) == "`x\\|y`"
    block = mdsafe.code_block(["```", "````", "<!-- notes:campaign -->"])
    fence = block.split("\n")[0].removesuffix("text")
    assert fence == "`````" and block.endswith("\n`````")


def test_paragraphs_keep_line_breaks_and_blockquote_prefixes_every_line():
    q = mdsafe.blockquote("first\nsecond\n\n# not a heading\n    not code")
    assert q.split("\n") == ["> first  ", "> second", ">", "> \\# not a heading  ", "> not code"]


def test_long_text_is_truncated_visibly():
    assert "(truncated, 100 more characters)" in mdsafe.paragraphs("x" * 6100)


def test_slug():
    assert mdsafe.slug("eagle-fast-verify/EAGLE3 (CUDA 13)#2") == "eagle-fast-verify-eagle3-cuda-13-2"
    assert mdsafe.slug("###") == "x"


COMMONMARK = MarkdownIt("commonmark")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_stays_inert(value):
    s = mdsafe.text(value)
    assert "<" not in s and "\n" not in s
    # indentation is U+0020 alone (CommonMark): "\xa0#" is a paragraph, not a heading
    assert not re.match(r" *(#|>|```|~~~|[-*+]\s|\d+[.)]\s)", s)
    # and a real CommonMark parser (markdown-it-py, rich's own) sees one paragraph or nothing
    assert {t.type for t in COMMONMARK.parse(s)} <= {"paragraph_open", "inline", "paragraph_close"}, s
    assert re.search(r"(?<!\\)(\\\\)*\[", s) is None  # every [ is escaped
    c = mdsafe.cell(value)
    assert "\n" not in c and re.search(r"(?<!\\)(\\\\)*\|", c) is None
    doc = f"<!-- notes:campaign -->\nmine\n<!-- /notes:campaign -->\n{mdsafe.blockquote(value)}\n"
    assert parse_notes(doc, "c1") == {"campaign": "mine"}
