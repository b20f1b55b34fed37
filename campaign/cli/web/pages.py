"""A campaign's page and an experiment's page, from the journal's own section code.

The campaign page is the journal's main part (`render_main`: header, baseline,
scoreboard, dead ends, reviews, planner) with each experiment linked to its own page
instead of shown in full; an experiment's page is the journal's section of it
(`experiment_body`).  Both go through `campaign.cli.web.html`, so the web view and the
Markdown journal cannot drift apart.
"""

from __future__ import annotations

from urllib.parse import quote

from campaign.cli.web.html import journal_html
from campaign.domain.records import CampaignView, ExperimentView
from campaign.journal.format import row_prefix, scoreboard_cells
from campaign.journal.plots import has_overview, plot_workloads
from campaign.journal.render import MainParts, experiment_body, experiment_keys, render_main

__all__ = ["campaign_html", "campaign_url", "experiment_by_key", "experiment_html", "experiment_url"]


def campaign_url(campaign_id: str) -> str:
    return f"/c/{quote(campaign_id, safe='')}"


def experiment_url(campaign_id: str, key: str) -> str:
    return f"{campaign_url(campaign_id)}/e/{quote(key, safe='')}"


def campaign_html(view: CampaignView, db_label: str) -> str:
    keys = experiment_keys(view)
    parts = MainParts(
        ids=[e.id for e in view.experiments],
        rows={e.id: row_prefix(scoreboard_cells(view, e, n)) for n, e in enumerate(view.experiments, 1)},
        links={e.id: experiment_url(view.id, keys[e.id]) for e in view.experiments},
        bodies={},
        keys=keys,
    )
    overview = f"{campaign_url(view.id)}/overview.png" if has_overview(view) else None
    return journal_html(render_main(view, None, parts, overview_plot=overview, db_label=db_label, notes={}))


def experiment_by_key(view: CampaignView, key: str) -> tuple[int, ExperimentView] | None:
    """The experiment whose journal key (its anchor in the Markdown journal) is `key`."""
    keys = experiment_keys(view)
    for number, exp in enumerate(view.experiments, 1):
        if keys[exp.id] == key:
            return number, exp
    return None


def experiment_html(view: CampaignView, number: int, exp: ExperimentView, key: str) -> str:
    plot = f"{experiment_url(view.id, key)}/plot.png" if plot_workloads(exp) else None
    return journal_html(experiment_body(view, exp, number, key, plot))
