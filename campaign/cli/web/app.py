"""The read-only web view: a Starlette app over a campaign database.

Every route is GET (a POST, PUT or DELETE gets 405): decisions stay in `campaign
resume`, where they are recorded with who took them.  Each request reads through its own
read-only connection (`campaign.store.reader`), a WAL snapshot, so a running campaign's
writer is never blocked and a page is never half old, half new.  Pages are the journal's
own sections (`campaign.cli.web.pages`); templates autoescape everything else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from campaign.cli.web.guard import Guard, GuardMiddleware
from campaign.cli.web.pages import campaign_html, campaign_url, experiment_by_key, experiment_html, experiment_url
from campaign.domain.errors import UserError
from campaign.domain.records import CampaignView
from campaign.journal.format import fmt_time
from campaign.journal.render import experiment_keys
from campaign.store.progress import RunningExperiment
from campaign.store.quick import campaign_list
from campaign.store.reader import JournalReader, open_reader

__all__ = ["make_app"]

_HERE = Path(__file__).parent


def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
                              autoescape=True, undefined=jinja2.StrictUndefined)


class _Site:
    """The routes' shared state: which database, how to name it, the templates."""

    def __init__(self, db: Path, db_label: str) -> None:
        self.db, self.db_label, self.env = db, db_label, _templates()

    @contextmanager
    def reader(self) -> Iterator[JournalReader]:
        reader = open_reader(self.db)
        if reader is None:
            raise HTTPException(503, f"{self.db}: cannot be read as a campaign database of this version "
                                     "(fix: run `campaign status --db` on it once to migrate it)")
        try:
            yield reader
        finally:
            reader.close()

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("campaign_id", None)
        context.setdefault("campaign_link", None)
        html = self.env.get_template(name).render(db_label=self.db_label, **context)
        return HTMLResponse(html, status_code=status)


def _read(site: _Site, campaign_id: str) -> tuple[str, CampaignView, list[RunningExperiment]]:
    """The record's version, the campaign's view and its running experiments, from one
    reader; an unknown campaign is a 404."""
    with site.reader() as reader:
        version = reader.version()
        try:
            view = reader.view(campaign_id)
        except UserError as exc:
            raise HTTPException(404, str(exc)) from None
        running = reader.running(campaign_id)
    return version, view, running


def make_app(db: Path, *, db_label: str = "", guard: Guard | None = None) -> Starlette:
    site = _Site(db, db_label or str(db))

    def index(request: Request) -> Response:
        with site.reader() as reader:
            version = reader.version()
        items = campaign_list(db) or []
        rows = [{**c, "link": campaign_url(c["id"])} for c in items]
        return site.page("index.html", title="campaigns", version=version, campaigns=rows)

    def campaign(request: Request) -> Response:
        cid = request.path_params["cid"]
        version, view, running = _read(site, cid)
        keys = experiment_keys(view)
        progress = [{
            "hypothesis": r.hypothesis, "attempt": r.attempt, "started": fmt_time(r.started_at),
            "rounds": ", ".join(f"{side} {n}" for side, n in sorted(r.rounds.items())),
            "last": fmt_time(r.last_recorded_at) if r.last_recorded_at else None,
            "link": experiment_url(cid, keys[r.id]) if r.id in keys else campaign_url(cid),
        } for r in running]
        return site.page("campaign.html", title=view.name, version=version, campaign_id=cid,
                         campaign_link=campaign_url(cid), running=progress,
                         body=Markup(campaign_html(view, site.db_label)))

    def experiment(request: Request) -> Response:
        cid, key = request.path_params["cid"], request.path_params["key"]
        version, view, _running = _read(site, cid)
        found = experiment_by_key(view, key)
        if found is None:
            raise HTTPException(404, f"campaign {cid} has no experiment {key}")
        number, exp = found
        return site.page("experiment.html", title=f"{exp.hypothesis} · {view.name}", version=version,
                         campaign_id=cid, campaign_link=campaign_url(cid),
                         body=Markup(experiment_html(view, number, exp, key)))

    def plot(request: Request) -> Response:
        from campaign.journal.plots import experiment_png

        cid, key = request.path_params["cid"], request.path_params["key"]
        _version, view, _running = _read(site, cid)
        found = experiment_by_key(view, key)
        png = experiment_png(found[1]) if found else None
        if png is None:
            raise HTTPException(404, "no plot")
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    def overview(request: Request) -> Response:
        from campaign.journal.plots import overview_png

        _version, view, _running = _read(site, request.path_params["cid"])
        png = overview_png(view)
        if png is None:
            raise HTTPException(404, "no plot")
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    def version(request: Request) -> Response:
        with site.reader() as reader:
            return JSONResponse({"version": reader.version(), "at": time.time()},
                                headers={"Cache-Control": "no-store"})

    async def error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        if request.url.path.startswith("/api/") or request.url.path.endswith(".png"):
            return JSONResponse({"error": detail}, status_code=code)
        return site.page("error.html", status=code, title=f"{code}", message=detail, version="")

    routes = [
        Route("/", index),
        Route("/api/version", version),
        Route("/c/{cid}", campaign),
        Route("/c/{cid}/overview.png", overview),
        Route("/c/{cid}/e/{key}", experiment),
        Route("/c/{cid}/e/{key}/plot.png", plot),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    middleware = [Middleware(GuardMiddleware, guard=guard or Guard())]
    return Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: error})

