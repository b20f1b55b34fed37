"""The journal's Planner section: rejected answers and failed calls, escaped and counted."""

from __future__ import annotations

from campaign.domain.records import PlannerCall
from campaign.journal.render import render_journal
from tests.campaign.seed_campaign import seed_view

INJECT = "x | y\n## Fake heading <!-- notes:campaign --> [link](http://evil) \u202eevil `code`"


def test_rejections_are_escaped_and_identical_ones_counted() -> None:
    view = seed_view()
    calls = [
        PlannerCall(purpose="propose", outcome="rejected", reason=INJECT, output='{"name": "[/bold]"}')
        for _ in range(20)
    ]
    calls += [
        PlannerCall(purpose="analyze", outcome="failed", reason="planner: x answered HTTP 200 with an HTML page"),
        PlannerCall(purpose="propose", outcome="accepted", output='{"name": "ok"}'),
    ]
    view = view.model_copy(
        update={"planner_calls": calls, "planner_notes": ["planner stopped: 20 proposals rejected in a row # <b>"]}
    )
    doc = render_journal(view)
    section = doc.split("\n## Planner\n", 1)[1].split("\n## ", 1)[0]
    assert "22 model calls: 1 accepted, 20 answers rejected, 1 calls failed." in section
    assert "- planner stopped: 20 proposals rejected in a row # &lt;b>" in section
    rows = [ln for ln in section.splitlines() if ln.startswith(("| rejected", "| failed"))]
    assert len(rows) == 2 and "| 20 |" in rows[0] and "| 1 |" in rows[1]
    assert (
        "x \\| y ## Fake heading &lt;!-- notes:campaign --> \\[link\\](http://evil) (U+202E)evil \\`code\\`" in rows[0]
    )
    assert "\u202e" not in doc and "\n## Fake heading" not in doc and "<!-- notes:campaign -->" not in section


def test_no_section_without_planner_calls() -> None:
    assert "\n## Planner\n" not in render_journal(seed_view())
