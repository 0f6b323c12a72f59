"""Alembic environment: async; the URL from the caller (`personae db upgrade`), alembic.ini, or the
environment (DATABASE_URL, else the embedded PostgreSQL under PERSONAE_DATA_DIR), never the domain."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from models import Base

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from dotenv import dotenv_values

    from models.database import asyncpg_url, start_embedded_postgres

    # A developer's `alembic revision --autogenerate`: the same variables the app reads.
    environment = {**dotenv_values(".env"), **os.environ}
    if environment.get("DATABASE_URL"):
        return asyncpg_url(str(environment["DATABASE_URL"]))
    data_dir = Path(environment.get("PERSONAE_DATA_DIR") or Path.cwd() / ".data")
    return start_embedded_postgres(data_dir)


def _configure_and_run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine: AsyncEngine = create_async_engine(_database_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure_and_run)
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        # Called from inside a running event loop (tests, start-up): reuse its connection.
        _configure_and_run(connection)
        return
    asyncio.run(_run_async())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
