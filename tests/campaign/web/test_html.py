"""The web pages are the journal's sections as HTML: the journal's hostile-markup cases
hold here too, and what only the file needs (notes markers, anchors) is gone, but never
from inside a log excerpt."""

from __future__ import annotations

import re

from campaign.cli.web.html import journal_html
from campaign.cli.web.pages import campaign_html, experiment_by_key, experiment_html
from campaign.journal.render import experiment_keys
from tests.campaign.seed_campaign import seed_view

HOSTILE = (
    "<!-- /notes:eagle3-2 -->\n<!-- notes:campaign -->\nSTOLEN\n<!-- /notes:campaign -->\n"
    "# Fake heading\n| a | b |\n|---|---|\n[click](http://evil) ![img](http://evil/x.png)\n"
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">\n```\n<b>x</b>'
)
EVIDENCE = ["<!-- notes:campaign -->", "```", "STOLEN TOO", "<!-- /notes:campaign -->", "## not a heading"]


def _hostile_view():
    view = seed_view()
    exps = list(view.experiments)
    exps[-1] = exps[-1].model_copy(
        update={"analysis": HOSTILE, "hypothesis": "eagle3 | <i>x</i>", "rationale": HOSTILE}
    )
    exps[1] = exps[1].model_copy(update={"failure": exps[1].failure.model_copy(update={"evidence": EVIDENCE})})
    return view.model_copy(update={"experiments": exps, "halt_reason": "<script>alert(1)</script>"})


def _page(view, exp_id):
    key = experiment_keys(view)[exp_id]
    number, exp = experiment_by_key(view, key)
    return experiment_html(view, number, exp, key)


def _no_markup(html: str) -> None:
    assert re.search(r"<(script|img src=\"?x|b>|i>)", html) is None
    assert 'href="http://evil' not in html and 'src="http://evil' not in html
    assert "<h1>Fake heading" not in html


def test_hostile_model_text_is_text_in_every_page() -> None:
    view = _hostile_view()
    main = campaign_html(view, "db")
    _no_markup(main)
    assert "eagle3 | &lt;i&gt;x&lt;/i&gt;" in main  # the scoreboard keeps its columns, the name its text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in main
    page = _page(view, view.experiments[-1].id)
    _no_markup(page)
    assert (
        "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;"
        in page
    )


def test_a_log_excerpt_keeps_every_line() -> None:
    """A log line that looks like a notes marker or a heading is evidence: shown, not dropped."""
    page = _page(_hostile_view(), _hostile_view().experiments[1].id)
    for line in ("&lt;!-- notes:campaign --&gt;", "STOLEN TOO", "&lt;!-- /notes:campaign --&gt;", "## not a heading"):
        assert line in page


def test_the_file_only_parts_are_gone() -> None:
    view = seed_view()
    main = campaign_html(view, "db")
    assert "notes:" not in main and "<h2>Notes</h2>" not in main and "edit only inside notes blocks" not in main
    assert "<h2>Scoreboard</h2>" in main and "<h2>Dead ends</h2>" in main
    assert "&lt;a id=" not in _page(view, view.experiments[0].id)
    assert journal_html("## Empty\n\n## Kept\n\ntext\n") == "<h2>Kept</h2>\n<p>text</p>\n"


def test_the_journals_folded_blocks_are_real_details_and_their_summary_stays_text() -> None:
    """The journal folds its statistics into `<details>`; markdown-it with raw HTML off
    showed those lines as text. Only the journal's own whole lines open and close one: a
    summary is inline Markdown (escaped), and the same lines inside a code block stay text."""
    md = (
        "<details><summary>How it was decided (noise 1.2% &lt;script&gt;)</summary>\n\n- a <b> b\n\n</details>\n\n"
        "```text\n<details><summary>inside a log</summary>\n```\n\n"
        "<details><summary><img src=x onerror=alert(1)></summary>\n\n</details>"
    )
    html = journal_html(md)
    assert html.count("<details>") == 2 and html.count("</details>") == 2
    assert "<summary>How it was decided (noise 1.2% &lt;script&gt;)</summary>" in html
    assert "&lt;details&gt;&lt;summary&gt;inside a log" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<li>a &lt;b&gt; b</li>" in html
