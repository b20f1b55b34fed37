"""Where the campaign record lives: a SQLite file path, or a PostgreSQL URL.

Why a password may not be in the URL: the URL is shown in errors and the journal's
header, and the playbook that may hold it is stored with the campaign.  libpq reads the
password from PGPASSWORD or the .pgpass itself, so the URL never needs one.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ENV", "has_password", "is_url", "redact", "resolve", "sqlalchemy_url"]

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


def resolve(db: str | None, default: str) -> str:
    """`--db`, else CAMPAIGN_DATABASE_URL, else the playbook's `database:` (or the
    default file)."""
    return db or os.environ.get(ENV) or default
