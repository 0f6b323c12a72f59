"""The memory service end to end (real PostgreSQL, real Qdrant Edge, a real embedding model, the
summarizer LLM over HTTP on 127.0.0.1): its tests' service summarizes through the test server and
shares its Edge index with them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.llm import LLMClient
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.types import ModelConfig
from testkit.llm_server import LLMTestServer
from testkit.memory_service import make_service


@pytest.fixture
async def summarizer_cfg(llm_server: LLMTestServer) -> ModelConfig:
    return ModelConfig(
        model="openai/test-summarizer", api_base=llm_server.base_url, api_key="test", timeout=2.0
    )


@pytest.fixture
def llm_client() -> LLMClient:
    return LLMClient(max_concurrency_per_provider=8, max_retries=1, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[VectorIndex]:
    index = EdgeVectorIndex(tmp_path / "qdrant")
    yield index
    await index.close()


@pytest.fixture
async def service(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    llm_client: LLMClient,
    summarizer_cfg: ModelConfig,
) -> MemoryService:
    return make_service(sessionmaker, index, embedder, llm_client, summarizer_cfg)
