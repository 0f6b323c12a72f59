"""Apply Alembic migrations programmatically (no alembic.ini needed at run time)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """A Config pointing at the packaged migrations, bound to a connection or URL."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    if connection is not None:
        config.attributes["connection"] = connection
    if url is not None:
        config.attributes["database_url"] = url
    return config


async def upgrade_database(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema to `revision` (idempotent; a no-op when already there)."""
    if revision == "head" and await _stored_revision(engine) == migrations.HEAD:
        return
    from alembic import command

    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: command.upgrade(alembic_config(sync), revision))


async def _stored_revision(engine: AsyncEngine) -> str | None:
    """The revision the database records, read without Alembic; None before the first migration."""
    try:
        async with engine.connect() as connection:
            revision: str | None = await connection.scalar(text("SELECT version_num FROM alembic_version"))
            return revision
    except ProgrammingError:  # no alembic_version table yet
        return None


async def downgrade_database(engine: AsyncEngine, revision: str) -> None:
    from alembic import command

    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), revision))


async def current_revision(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    async with engine.connect() as connection:
        return await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())
