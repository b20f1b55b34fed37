"""`campaign serve`: choose the guard for the address, then run uvicorn until Ctrl-C."""

from __future__ import annotations

import os
from pathlib import Path

from campaign.cli.web.guard import TOKEN_ENV, Guard, is_loopback
from campaign.domain.errors import UserError

__all__ = ["guard_for", "serve"]

MIN_TOKEN = 16


def guard_for(host: str, environ: dict[str, str] | None = None) -> Guard:
    """Loopback: no token, Host header pinned.  Anywhere else: the token from the
    environment, refused when missing or short."""
    env = os.environ if environ is None else environ
    if is_loopback(host):
        return Guard(hosts=frozenset({host.strip("[]"), "localhost", "127.0.0.1"}))
    token = env.get(TOKEN_ENV, "")
    if len(token) < MIN_TOKEN:
        raise UserError(
            f"--host {host}: a view bound off this machine needs a token of at least {MIN_TOKEN} "
            f"characters in {TOKEN_ENV} (fix: export {TOKEN_ENV}=$(openssl rand -hex 16), "
            "or serve on 127.0.0.1 and use an ssh tunnel)"
        )
    return Guard(token=token)


def serve(db: Path | str, *, host: str, port: int, db_label: str) -> None:
    import socket

    import uvicorn

    from campaign.cli.web.app import make_app

    guard = guard_for(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except (OSError, OverflowError) as exc:
        sock.close()
        raise UserError(
            f"--host {host} --port {port}: cannot listen there ({getattr(exc, 'strerror', None) or exc}) "
            "(fix: pick a free port with --port, or an address of this machine with --host)"
        ) from None
    port = sock.getsockname()[1]
    app = make_app(db, db_label=db_label, guard=guard)
    shown = f"[{host}]" if ":" in host else host
    print(f"campaign serve: http://{shown}:{port}/ (read-only view of {db_label}; Ctrl-C stops)", flush=True)
    if guard.token:
        print(
            f"campaign serve: a token is required: open http://{shown}:{port}/?token=<the value of {TOKEN_ENV}>",
            flush=True,
        )
    # no access log: a first visit's URL carries the token
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])
