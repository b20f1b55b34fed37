"""Opening the campaign database (a SQLite file, or a PostgreSQL URL): schema version,
short transactions.

Why the explicit BEGIN: pysqlite's implicit transactions start deferred, and a
deferred transaction that upgrades to a write lock fails with SQLITE_BUSY without
waiting.  Writers therefore take `BEGIN IMMEDIATE` (they queue on busy_timeout),
readers take a plain `BEGIN` (a WAL snapshot that never blocks the writer).
PostgreSQL takes its own transactions (MVCC: readers never block the writer either);
its URL carries no password (libpq reads PGPASSWORD or the .pgpass), see
campaign.domain.location.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, create_engine

from campaign.domain import location
from campaign.domain.errors import UserError
from campaign.domain.private import private_file
from campaign.store import changes, showcache, tally
from campaign.store.dialect import PgConn, translate
from campaign.store.models import SCHEMA_VERSION, TABLES, MetaRow

MIGRATABLE = frozenset({"1", "2", "3"})  # versions campaign.store.migrate brings up to date

BUSY_TIMEOUT_MS = 10_000
#: the PostgreSQL advisory lock that serialises creating the schema and the checkpointer's tables
SCHEMA_LOCK_KEY = 0x63616D706169676E  # "campaign" in ASCII
_BEGIN_OPTION = "campaign_sqlite_begin"


def _fix_hint(path: Path) -> str:
    return (
        f"fix: set `database:` in the playbook to a writable path, or check that {path.parent} is a writable directory"
    )


def open_engine(path: Path | str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine on `path` (a file, or a postgresql:// URL) with the schema created or its
    version checked."""
    if location.is_url(str(path)):
        return _open_pg(str(path))
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{path}: cannot create the database directory: {exc.strerror or exc} ({_fix_hint(path)})"
        ) from None
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a database file (fix: point `database:` at a file path)")
    try:
        private_file(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot create the database: {exc.strerror or exc} ({_fix_hint(path)})") from None
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # BEGIN is emitted by _on_begin
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA page_size=16384")  # a new file only: packed rows of a few KB share pages
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get(_BEGIN_OPTION, 'DEFERRED')}")

    try:
        _ensure_schema(engine, str(path))
    except DBAPIError as exc:
        engine.dispose()
        hint = "fix: retry once the other `campaign` process is done" if "locked" in str(exc.orig) else _fix_hint(path)
        raise UserError(f"{path}: cannot open the database: {exc.orig} ({hint})") from None
    except UserError:
        engine.dispose()
        raise
    return engine


def _open_pg(url: str) -> Engine:
    """An engine on a PostgreSQL database (psycopg 3), the schema created or checked."""
    shown = location.redact(url)
    engine = create_engine(location.sqlalchemy_url(url), pool_pre_ping=True)
    try:
        _ensure_schema(engine, shown)
    except DBAPIError as exc:
        engine.dispose()
        reason = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__
        raise UserError(
            f"{shown}: cannot open the database: {reason} (fix: check that the server runs, the "
            "database exists, and the password is in PGPASSWORD or the .pgpass)"
        ) from None
    except UserError:
        engine.dispose()
        raise
    return engine


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def _schema_version(session: Session) -> str | None:
    """The recorded schema version, "missing" without one, None in a file without our tables."""
    if not inspect(session.connection()).has_table(MetaRow.__tablename__):
        return None
    row = session.get(MetaRow, "schema_version")
    return row.value if row else "missing"


def _ensure_schema(engine: Engine, shown: str) -> None:
    """Create the tables in a new file, migrate an older one (campaign.store.migrate), refuse
    any other version.  A current database is only read here, so opening never waits for a
    busy writer."""
    with read_session(engine) as session:
        found = _schema_version(session)
    if found is None:
        with write_session(engine) as session:
            if is_postgres(engine):  # BEGIN IMMEDIATE's part: one creator at a time, the others wait
                session.connection().exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})")
            found = _schema_version(session)  # another process may have just created it
            if found is None:
                conn = session.connection()
                for model in TABLES:
                    model.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]
                changes.install(conn)
                if is_postgres(engine):  # created on first use in SQLite; here an error would abort the transaction
                    for ddl in (tally.DDL, showcache.DDL, showcache.SEQ_DDL):
                        conn.exec_driver_sql(translate(ddl))
                session.add(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
                return
    if found != str(SCHEMA_VERSION) and found in MIGRATABLE:
        from campaign.store.migrate import migrate

        with write_session(engine) as session:
            found = _schema_version(session)  # another process may have migrated it meanwhile
            if found in MIGRATABLE:
                migrate(session, found)
                return
    if found != str(SCHEMA_VERSION):
        raise UserError(
            f"{shown}: schema_version: database schema version {found}, this campaign expects {SCHEMA_VERSION} "
            "(fix: point `database:` in the playbook at a new file or database, or move this one aside)"
        )


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A short write transaction (BEGIN IMMEDIATE), committed on success."""
    bind = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
    with Session(bind, expire_on_commit=False) as session, session.begin():
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A read snapshot: sees one consistent state, never blocks the writer (WAL; on
    PostgreSQL a REPEATABLE READ transaction, the same snapshot)."""
    bind = engine.execution_options(isolation_level="REPEATABLE READ") if is_postgres(engine) else engine
    with Session(bind, expire_on_commit=False) as session, session.begin():
        yield session


def driver_connection(session: Session) -> sqlite3.Connection:
    """The driver connection of the session's open transaction: what the plain readers
    (campaign.store.plain) query, so they see the same snapshot.  On PostgreSQL it is
    wrapped to take the same SQL (campaign.store.dialect)."""
    conn = session.connection().connection.driver_connection
    if isinstance(conn, sqlite3.Connection):
        return conn
    return PgConn(conn)  # type: ignore[return-value]  # sqlite3's execute/fetch, see dialect.PgConn
