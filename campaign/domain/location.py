"""Where the campaign record lives: a SQLite file path, or a PostgreSQL URL.

Why a password may not be in the URL: the URL is shown in errors and the journal's
header, and the playbook that may hold it is stored with the campaign.  libpq reads the
password from PGPASSWORD or the .pgpass itself, so the URL never needs one.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from campaign.domain.errors import UserError

__all__ = [
    "DEFAULT_FILE",
    "ENV",
    "check",
    "has_password",
    "is_postgres",
    "is_url",
    "redact",
    "resolve",
    "sqlalchemy_url",
    "state_anchor",
]

DEFAULT_FILE = ".campaign/campaign.db"

#: overrides the playbook's `database:` (and the default file) for every command
ENV = "CAMPAIGN_DATABASE_URL"
_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


def is_url(db: str) -> bool:
    """A `scheme://` value (the only kind not taken as a file path)."""
    return "://" in db


def is_postgres(db: str) -> bool:
    return db.partition("://")[0] in _SCHEMES


def has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def redact(url: str) -> str:
    """The URL with any password left out (what errors and the journal show)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return url.partition("://")[0] + "://..."


def sqlalchemy_url(url: str) -> str:
    """The psycopg 3 driver's URL for a postgresql:// one."""
    return "postgresql+psycopg://" + url.partition("://")[2]


def check(db: str, source: str) -> str:
    """`db` when it is a file path or a PostgreSQL URL without a password; else one line
    naming `source` and the fix (the password never repeated)."""
    if not is_url(db):
        return db
    if has_password(db):
        raise UserError(
            f"{source}: a password is written in the database URL (fix: remove it from the URL "
            "and put it in PGPASSWORD or a .pgpass file; change that password)"
        )
    if not is_postgres(db):
        raise UserError(
            f"{source}: {db.partition('://')[0]}:// databases are not supported (fix: a SQLite "
            "file path, e.g. .campaign/campaign.db, or a postgresql://user@host/dbname URL)"
        )
    return db


def resolve(db: str | None, default: str = DEFAULT_FILE) -> str:
    """`--db`, else CAMPAIGN_DATABASE_URL, else the playbook's `database:` (or the
    default file); a URL checked (`check`)."""
    if db:
        return check(db, "--db")
    if os.environ.get(ENV):
        return check(os.environ[ENV], ENV)
    return check(default, "database")


def state_anchor(db: str) -> Path:
    """The path whose directory holds this controller's local state (the process ledger,
    node workdirs, SQLite checkpoints): the database file itself, or for a server
    database `.campaign/` in the working directory."""
    return Path(DEFAULT_FILE) if is_url(db) else Path(db)
