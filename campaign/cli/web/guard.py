"""Who may read the web view, and what a page may do once loaded.

Bound to 127.0.0.1 (the default) only this machine can connect, and the Host header must
name the loopback address, so a web page elsewhere cannot reach the view through DNS
rebinding.  Bound to any other address a token is required: `?token=` once (the answer
moves it into an HttpOnly, same-site cookie and redirects to the URL without it, so it
leaves the address bar and the history), or an `Authorization: Bearer` header.  The token
comes from the environment only (never a command line or a file the project writes).
Every answer carries a Content-Security-Policy that allows only the view's own script and
styles: were some text ever to slip past the escaping, the browser would still not run it.
"""

from __future__ import annotations

import ipaddress
import secrets
from urllib.parse import urlencode

from pydantic import BaseModel
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["COOKIE", "TOKEN_ENV", "Guard", "GuardMiddleware", "is_loopback"]

TOKEN_ENV = "CAMPAIGN_SERVE_TOKEN"
COOKIE = "campaign_serve_token"
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard(BaseModel):
    """`token`: required from every client (None: bound to loopback, none needed).
    `hosts`: the Host header values accepted (None: any)."""

    token: str | None = None
    hosts: frozenset[str] | None = None

    def __repr__(self) -> str:  # the token never reaches a log or a traceback
        return f"Guard(token={'set' if self.token else None}, hosts={self.hosts})"

    __str__ = __repr__


class GuardMiddleware(BaseHTTPMiddleware):
    def __init__(self, app: object, guard: Guard) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.guard = guard

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._check(request, call_next)
        for k, v in _HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    async def _check(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        g = self.guard
        if g.hosts is not None and (request.url.hostname or "") not in g.hosts:
            return PlainTextResponse(
                f"campaign serve: this view answers only to its own address ({', '.join(sorted(g.hosts))})",
                status_code=421,
            )
        if g.token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and _same(given, g.token):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            target = request.url.path + (f"?{rest}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(COOKIE, g.token, httponly=True, samesite="strict", path="/")
            return redirect
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        if _same(request.cookies.get(COOKIE), g.token) or _same(bearer, g.token):
            return await call_next(request)
        return PlainTextResponse(
            f"campaign serve: a token is required (open this address with ?token=<the value "
            f"of {TOKEN_ENV} on the server>)",
            status_code=401,
        )


def _same(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())
