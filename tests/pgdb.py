"""A fresh PostgreSQL database per test, on the server CI starts (.ci/postgres_up.sh).

Why a database per test and not a schema: the store creates its tables, triggers and
functions in the database it is given, and xdist workers must not see each other's.
Without a server: a skip naming the reason locally, a failure in CI (CI=true), so CI
cannot pass by skipping.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.needs import missing

BACKENDS = ["sqlite", "postgresql"]


def server_url() -> str:
    """The test server's URL (no password: it is in PGPASSFILE), or skip/fail."""
    url = os.environ.get("CAMPAIGN_TEST_DATABASE_URL", "")
    if not url:
        missing(
            "no PostgreSQL: CAMPAIGN_TEST_DATABASE_URL is not set "
            "(sudo bash .ci/postgres_up.sh; set -a; . /tmp/campaign-pg/env; set +a)"
        )
    return url


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards."""
    import psycopg

    base = server_url()
    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=BACKENDS)
def backend_db(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """A campaign database location: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path) + "/campaign.db"
        return
    with fresh_database() as url:
        yield url


def scalar(db: object, sql: str) -> object:
    """One value from either database (a file path or a URL), outside any Store."""
    if "://" in str(db):
        import psycopg

        with psycopg.connect(str(db)) as conn:
            row = conn.execute(sql).fetchone()
    else:
        import sqlite3

        with sqlite3.connect(str(db)) as conn:
            row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def execute(db: object, sql: str, params: tuple[object, ...] = ()) -> None:
    """A write that is not the Store's, on either database (SQLite's `?` placeholders)."""
    if "://" in str(db):
        import psycopg

        from campaign.store.dialect import translate

        with psycopg.connect(str(db)) as conn:
            conn.execute(translate(sql), params)
    else:
        import sqlite3

        with sqlite3.connect(str(db)) as conn:
            conn.execute(sql, params)
