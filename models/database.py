"""The async engine and session factory, and the embedded PostgreSQL used when no URL is set."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "personae"


def asyncpg_url(url: str) -> str:
    """A PostgreSQL URL as users write it (postgres://, postgresql://) with the asyncpg driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    if not url.startswith("postgresql+asyncpg://"):
        raise ValueError("must start with postgresql:// (for example postgresql://user:pw@host/db)")
    return url


def create_engine(url: str, *, pool_size: int = 5) -> AsyncEngine:
    """An asyncpg engine; pre-ping so a restarted database does not fail the first query."""
    return create_async_engine(url, pool_size=pool_size, max_overflow=10, pool_pre_ping=True)


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions whose objects stay usable after commit, for returning plain values from services."""
    return async_sessionmaker(engine, expire_on_commit=False)


def start_embedded_postgres(data_dir: Path, database: str = EMBEDDED_DATABASE) -> str:
    """Start (or join) the embedded PostgreSQL under data_dir and return an asyncpg URL for it.

    pgserver shares one server per data directory between all processes of this machine and
    stops it when the last one exits.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its /tmp fallback is fine.
        warnings.simplefilter("ignore")
        import pgserver  # a second of start-up; only paid when the embedded database is used

        pgdata = (data_dir / "postgres").resolve()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        log.debug("Starting embedded PostgreSQL in %s", pgdata)
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    uri = server.get_uri(database)
    return uri.replace("postgresql://", "postgresql+asyncpg://", 1)
