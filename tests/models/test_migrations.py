"""The schema is made only by migrations: they go up and down cleanly and match the models."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from models import Base
from models.database import create_engine
from models.migrate import current_revision, downgrade_database, upgrade_database

EXPECTED_TABLES = {
    "llm_configs",
    "system_prompts",
    "personalities",
    "user_settings",
    "conversations",
    "messages",
    "summaries",
    "memories",
    "channel_bindings",
}


@pytest.fixture
async def scratch_engine(scratch_database_url: str) -> AsyncIterator[AsyncEngine]:
    """A separate, empty database so up/down migrations don't disturb the shared one."""
    scratch = create_engine(scratch_database_url)
    yield scratch
    await scratch.dispose()


async def _tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as connection:
        names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
    return set(names) - {"alembic_version"}


async def test_upgrade_downgrade_upgrade(scratch_engine: AsyncEngine) -> None:
    assert await _tables(scratch_engine) == set()
    await upgrade_database(scratch_engine)
    assert await _tables(scratch_engine) == EXPECTED_TABLES
    assert await current_revision(scratch_engine) is not None

    await downgrade_database(scratch_engine, "base")
    assert await _tables(scratch_engine) == set()
    assert await current_revision(scratch_engine) is None

    await upgrade_database(scratch_engine)
    await upgrade_database(scratch_engine)  # idempotent at head
    assert await _tables(scratch_engine) == EXPECTED_TABLES


async def test_models_match_migrations(engine: AsyncEngine) -> None:
    """Autogenerate finds nothing to do: no model change lacks its migration."""
    async with engine.connect() as connection:
        diff = await connection.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"compare_type": True}), Base.metadata
            )
        )
    assert diff == []
