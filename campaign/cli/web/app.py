"""The read-only web view: a Starlette app over a campaign database.

Every route is GET (a POST, PUT or DELETE gets 405): decisions stay in `campaign
resume`, where they are recorded with who took them.  Each request reads through its own
read-only connection (`campaign.store.reader`), a WAL snapshot, so a running campaign's
writer is never blocked and a page is never half old, half new.  Pages are the journal's
own sections (`campaign.cli.web.pages`); templates autoescape everything else.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
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
from campaign.store.reader import ReadOnlyStore, open_reader

__all__ = ["make_app"]

_HERE = Path(__file__).parent
_NO_STORE = {"Cache-Control": "no-store"}  # the record moves on: a browser asks again


def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")), autoescape=True, undefined=jinja2.StrictUndefined
    )


class _Site:
    """The routes' shared state: which database, how to name it, the templates, and the
    pages already rendered for the record's current version (a 500-experiment campaign's
    page takes seconds to render: each change is rendered once, whoever is watching)."""

    CACHED = 64

    def __init__(self, db: Path | str, db_label: str) -> None:
        self.db, self.db_label, self.env = db, db_label, _templates()
        self._cache: OrderedDict[tuple[str, str], tuple[bytes, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, path: str, build: Callable[[str], Response]) -> Response:
        """`build(version)`'s answer, or the one it gave before for this path and version."""
        with self.reader() as reader:
            version = reader.version()
        with self._lock:
            hit = self._cache.get((path, version))
            if hit is not None:
                self._cache.move_to_end((path, version))
        if hit is not None:
            return Response(hit[0], media_type=hit[1], headers=_NO_STORE)
        response = build(version)
        if response.status_code == 200:
            with self._lock:
                self._cache[(path, version)] = (bytes(response.body), response.media_type)
                while len(self._cache) > self.CACHED:
                    self._cache.popitem(last=False)
        return response

    @contextmanager
    def reader(self) -> Iterator[ReadOnlyStore]:
        reader = open_reader(self.db)
        if reader is None:
            raise HTTPException(
                503,
                f"{self.db}: cannot be read as a campaign database of this version "
                "(fix: run `campaign status --db` on it once to migrate it)",
            )
        try:
            yield reader
        finally:
            reader.close()

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("campaign_id", None)
        context.setdefault("campaign_link", None)
        html = self.env.get_template(name).render(db_label=self.db_label, **context)
        return HTMLResponse(html, status_code=status, headers=_NO_STORE)


def _png(png: bytes | None) -> Response:
    if png is None:
        raise HTTPException(404, "no plot")
    return Response(png, media_type="image/png", headers=_NO_STORE)


def _read(site: _Site, campaign_id: str) -> tuple[CampaignView, list[RunningExperiment]]:
    """The campaign's view and its running experiments, from one reader; an unknown
    campaign is a 404."""
    with site.reader() as reader:
        try:
            view = reader.view(campaign_id)
        except UserError as exc:
            raise HTTPException(404, str(exc)) from None
        running = reader.running(campaign_id)
    return view, running


def make_app(db: Path | str, *, db_label: str = "", guard: Guard | None = None) -> Starlette:
    site = _Site(db, db_label or str(db))

    def index(request: Request) -> Response:
        with site.reader() as reader:
            version = reader.version()
        items = campaign_list(db) or []
        rows = [{**c, "link": campaign_url(c["id"])} for c in items]
        return site.page("index.html", title="campaigns", version=version, campaigns=rows)

    def campaign(request: Request) -> Response:
        cid = request.path_params["cid"]

        def build(version: str) -> Response:
            view, running = _read(site, cid)
            keys = experiment_keys(view)
            progress = [
                {
                    "hypothesis": r.hypothesis,
                    "attempt": r.attempt,
                    "started": fmt_time(r.started_at),
                    "rounds": ", ".join(f"{side} {n}" for side, n in sorted(r.rounds.items())),
                    "last": fmt_time(r.last_recorded_at) if r.last_recorded_at else None,
                    "link": experiment_url(cid, keys[r.id]) if r.id in keys else campaign_url(cid),
                }
                for r in running
            ]
            return site.page(
                "campaign.html",
                title=view.name,
                version=version,
                campaign_id=cid,
                campaign_link=campaign_url(cid),
                running=progress,
                body=Markup(campaign_html(view, site.db_label)),
            )

        return site.cached(request.url.path, build)

    def experiment(request: Request) -> Response:
        cid, key = request.path_params["cid"], request.path_params["key"]

        def build(version: str) -> Response:
            view, _running = _read(site, cid)
            found = experiment_by_key(view, key)
            if found is None:
                raise HTTPException(404, f"campaign {cid} has no experiment {key}")
            number, exp = found
            return site.page(
                "experiment.html",
                title=f"{exp.hypothesis} · {view.name}",
                version=version,
                campaign_id=cid,
                campaign_link=campaign_url(cid),
                body=Markup(experiment_html(view, number, exp, key)),
            )

        return site.cached(request.url.path, build)

    def plot(request: Request) -> Response:
        from campaign.journal.plots import experiment_png

        cid, key = request.path_params["cid"], request.path_params["key"]

        def build(_version: str) -> Response:
            found = experiment_by_key(_read(site, cid)[0], key)
            return _png(experiment_png(found[1]) if found else None)

        return site.cached(request.url.path, build)

    def overview(request: Request) -> Response:
        from campaign.journal.plots import overview_png

        return site.cached(request.url.path, lambda _v: _png(overview_png(_read(site, request.path_params["cid"])[0])))

    def version(request: Request) -> Response:
        with site.reader() as reader:
            return JSONResponse({"version": reader.version(), "at": time.time()}, headers=_NO_STORE)

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
