"""What the domain's tests share: a memory service on the test database and its own Edge index."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.llm import LLMClient
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.service import MemoryService
from memory.types import ModelConfig
from memory.wiring import MemoryServices
from testkit.llm_server import LLMTestServer
from testkit.memory_service import make_service, make_services


@pytest.fixture
async def services(
    sessionmaker: async_sessionmaker[AsyncSession], embedder: Embedder, tmp_path: Path
) -> AsyncIterator[MemoryServices]:
    """The memory and transfer services with extractive summaries and an Edge index in the test's folder."""
    index = EdgeVectorIndex(tmp_path / "qdrant")
    yield make_services(sessionmaker, index, embedder, LLMClient(), None)
    await index.close()


@pytest.fixture
def service(services: MemoryServices) -> MemoryService:
    """The memory service of `services`."""
    return services.memory


@pytest.fixture
async def summarizing_service(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    llm_server: LLMTestServer,
    tmp_path: Path,
) -> AsyncIterator[MemoryService]:
    """A memory service whose summaries come from the test server's summarizer model over HTTP."""
    cfg = ModelConfig(
        model="openai/test-summarizer", api_base=llm_server.base_url, api_key="test", timeout=2.0
    )
    llm = LLMClient(max_concurrency_per_provider=8, max_retries=1, backoff_base=0.01, backoff_max=0.05)
    index = EdgeVectorIndex(tmp_path / "qdrant")
    yield make_service(sessionmaker, index, embedder, llm, cfg)
    await index.close()
