"""Shared fixtures: one real PostgreSQL (embedded, or DATABASE_URL), migrated once per session.

Each test gets a sessionmaker bound to a connection whose outer transaction is rolled back, so tests
see only their own rows (rafsaf's pattern). Tests that need real commits across connections (worker
races) use `committed_sessionmaker`, which empties the tables afterwards.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memory.recall.embedders import Embedder, LocalEmbedder
from models.database import create_engine, start_embedded_postgres
from models.migrate import upgrade_database
from testkit.llm_server import LLMTestServer

TEST_DATABASE = "personae_test"


@pytest.fixture(scope="session")
def pg_data_dir() -> Path:
    """A short, world-traversable folder: PostgreSQL runs as another user when tests run as root,
    and its unix socket path must stay under 107 bytes (pytest's tmp dirs are 0700 and long)."""
    path = tempfile.mkdtemp(prefix="personae-pg-")
    os.chmod(path, 0o755)
    # Registered before pgserver registers its own stop, so it runs after the server stopped (LIFO).
    atexit.register(shutil.rmtree, path, True)
    return Path(path)


@pytest.fixture(scope="session")
def database_url(pg_data_dir: Path) -> str:
    """DATABASE_URL when set (a throwaway database!), else a fresh embedded PostgreSQL."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        return url.replace("postgresql://", "postgresql+asyncpg://", 1)
    return start_embedded_postgres(pg_data_dir, database=TEST_DATABASE)


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await upgrade_database(engine)
    yield engine
    await engine.dispose()


@pytest.fixture
async def sessionmaker(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions inside one outer transaction that is rolled back after the test."""
    async with engine.connect() as connection:
        transaction = await connection.begin()
        yield async_sessionmaker(
            bind=connection, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        if transaction.is_active:
            await transaction.rollback()


@pytest.fixture
async def committed_sessionmaker(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Real commits visible to every connection; all tables are emptied afterwards."""
    yield async_sessionmaker(engine, expire_on_commit=False)
    async with engine.begin() as connection:
        tables = (
            await connection.execute(
                text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                    "AND tablename <> 'alembic_version'"
                )
            )
        ).scalars()
        names = ", ".join(f'"{name}"' for name in tables)
        if names:
            await connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


def _url_for_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


@pytest.fixture
async def scratch_database_url(engine: AsyncEngine, database_url: str) -> AsyncIterator[str]:
    """An empty database of its own, for tests whose commits (subprocesses, migrations) must not leak."""

    async def recreate(drop_only: bool = False) -> None:
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("DROP DATABASE IF EXISTS personae_scratch WITH (FORCE)"))
            if not drop_only:
                await connection.execute(text("CREATE DATABASE personae_scratch"))

    await recreate()
    yield _url_for_database(database_url, "personae_scratch")
    await recreate(drop_only=True)


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMTestServer]:
    """An OpenAI-compatible server on 127.0.0.1 that answers, stalls, fails or drops as scripted."""
    async with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real local embedding model (all-MiniLM-L6-v2 on onnxruntime, offline), loaded once per session
    from the export scripts/setup made (made on first use otherwise)."""
    return LocalEmbedder()


@asynccontextmanager
async def open_test_runtime(
    engine: AsyncEngine,
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    data_dir: Path,
    **settings: Any,
) -> AsyncIterator[Any]:
    """The bot's Runtime built the way bot/runtime.py builds it, from the test pieces: a pooled
    sessionmaker with real commits (the concurrent path production runs), a fresh Qdrant Edge under
    `data_dir`, the real embedder, and these settings."""
    from bot.runtime import build_core, open_memory_services
    from bot.settings import load_bot_settings

    values: dict[str, Any] = {
        "database_url": None,
        "qdrant_url": None,
        "personae_data_dir": data_dir,
        "llm_timeout": 5.0,
        "catch_up_seconds": 0,  # no timer racing the test; the tests of the timer turn it on
        "llm_max_retries": 1,
        "admin_ids": ["900"],
    }
    core = build_core(load_bot_settings(**(values | settings)), engine, sessionmaker)
    async with open_memory_services(core, embedder=embedder) as runtime:
        yield runtime


@pytest.fixture
async def runtime(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    embedder: Embedder,
    llm_server: LLMTestServer,
    tmp_path: Path,
) -> AsyncIterator[Any]:
    """The bot's Runtime (tables emptied after the test), the LLM test server as chat and summarizer."""
    async with open_test_runtime(
        engine,
        committed_sessionmaker,
        embedder,
        tmp_path / "data",
        chat_model="openai/test-chat",
        chat_api_base=llm_server.base_url,
        chat_api_key="test",
        summarizer_model="openai/test-summarizer",
        summarizer_api_base=llm_server.base_url,
        summarizer_api_key="test",
    ) as runtime:
        yield runtime


@pytest.fixture
async def runtime_without_chat_model(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    embedder: Embedder,
    tmp_path: Path,
) -> AsyncIterator[Any]:
    """The bot's Runtime of a deployment that set no CHAT_MODEL (nor SUMMARIZER_MODEL)."""
    async with open_test_runtime(engine, committed_sessionmaker, embedder, tmp_path / "data") as runtime:
        yield runtime
