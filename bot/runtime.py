"""The composition root: settings -> database -> services, built in one place and closed together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.personalities import PersonalityService
from memory.settings import Settings
from models.database import create_engine, create_sessionmaker, start_embedded_postgres
from models.migrate import upgrade_database

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a command or the bot needs, already connected."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    personalities: PersonalityService


async def database_url(settings: Settings) -> str:
    """DATABASE_URL, or the embedded PostgreSQL under the data directory."""
    if settings.database_url:
        return settings.database_url
    return await asyncio.to_thread(start_embedded_postgres, settings.personae_data_dir)


@asynccontextmanager
async def open_runtime(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Runtime]:
    """Connect to the database (migrating it to head unless told not to) and build the services."""
    engine = create_engine(await database_url(settings))
    try:
        if migrate:
            await upgrade_database(engine)
        sessionmaker = create_sessionmaker(engine)
        yield Runtime(
            settings=settings,
            engine=engine,
            sessionmaker=sessionmaker,
            personalities=PersonalityService(sessionmaker),
        )
    finally:
        await engine.dispose()
