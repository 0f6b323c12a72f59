"""Embedders: the real local all-MiniLM-L6-v2 model (ONNX; more in test_local_embedder.py), and litellm
against the test server's /v1/embeddings."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.llm import LLMConfigError, LLMUnavailableError, RetryPolicy
from memory.recall.embedders import Embedder, LiteLLMEmbedder, make_embedder
from memory.recall.local_embedder import LocalEmbedder
from testkit.llm_server import Fail, LLMTestServer, hash_vector


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMTestServer]:
    """The shared test server, with 48-d embeddings so the dimension check means something."""
    async with LLMTestServer(embedding_dim=48) as server:
        yield server


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: list[float]) -> float:
    return math.sqrt(dot(v, v))


async def test_local_embedder_real_model(embedder: Embedder) -> None:
    # conftest's session-wide embedder is the real (ONNX) LocalEmbedder; this also checks that it is.
    assert isinstance(embedder, LocalEmbedder)
    texts = [
        "Alice adopted a small grey kitten last week.",
        "Last week Alice got a little gray cat.",
        "The quarterly tax report is due on Friday.",
    ]
    vectors = await embedder.embed(texts)
    assert embedder.dimension == 384
    assert embedder.model_name == "all-MiniLM-L6-v2"
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(abs(norm(v) - 1.0) < 1e-4 for v in vectors)
    assert dot(vectors[0], vectors[1]) > dot(vectors[0], vectors[2]) + 0.2


async def test_local_embedder_keeps_order_across_batches_and_concurrent_calls() -> None:
    embedder = LocalEmbedder(batch_size=2)
    texts = [f"memory number {i} about topic {i % 3}" for i in range(5)]
    together, *singles = await asyncio.gather(embedder.embed(texts), *(embedder.embed([t]) for t in texts))
    alone = [single for (single,) in singles]
    for position, vector in enumerate(together):
        # int8 activations are quantized per batch: a text's vector moves a little with its batch.
        assert dot(vector, alone[position]) > 0.98
        assert max(range(len(alone)), key=lambda i: dot(vector, alone[i])) == position
    assert await embedder.embed([]) == []


async def test_litellm_embedder_against_server(llm_server: LLMTestServer) -> None:
    embedder = LiteLLMEmbedder(
        "openai/test-embedding", llm_server.base_url, "test", dimension=None, timeout=5.0, batch_size=3
    )
    texts = [f"text {i}" for i in range(7)]
    vectors = await embedder.embed(texts)
    assert embedder.dimension == 48
    assert embedder.model_name == "openai/test-embedding"
    assert len(llm_server.requests) == 3  # batches of 3, 3, 1
    assert [r["input"] for r in llm_server.requests] == [texts[0:3], texts[3:6], texts[6:]]
    for text, vector in zip(texts, vectors, strict=True):
        assert abs(norm(vector) - 1.0) < 1e-9
        expected = hash_vector(text, 48)  # the server's raw vector is not unit length
        assert dot(vector, expected) == pytest.approx(norm(expected))


async def test_litellm_embedder_rejects_wrong_dimension(llm_server: LLMTestServer) -> None:
    embedder = LiteLLMEmbedder(
        "openai/test-embedding", llm_server.base_url, "test", dimension=1536, timeout=5
    )
    with pytest.raises(LLMConfigError, match="1536"):
        await embedder.embed(["hello"])


async def test_litellm_embedder_failure_is_unavailable(llm_server: LLMTestServer) -> None:
    embedder = LiteLLMEmbedder(
        "openai/test-embedding",
        llm_server.base_url,
        "test",
        dimension=48,
        timeout=5,
        retry=RetryPolicy(max_retries=1, backoff_base=0.01),
    )
    llm_server.script(Fail(500), Fail(500))
    with pytest.raises(LLMUnavailableError, match=r"embedding failed: server error 500.*\(2 attempts\)"):
        await embedder.embed(["hello"])
    # Exactly our two attempts: neither litellm nor the OpenAI SDK retried on its own.
    assert len(llm_server.requests) == 2
    llm_server.script(Fail(503))
    assert len((await embedder.embed(["hello"]))[0]) == 48  # our policy's one retry covers one failure
    assert len(llm_server.requests) == 4


async def test_litellm_embedder_config_errors_are_not_retried(llm_server: LLMTestServer) -> None:
    embedder = LiteLLMEmbedder(
        "openai/test-embedding", llm_server.base_url, "test", dimension=48, timeout=5, retry=RetryPolicy()
    )
    llm_server.script(Fail(401))
    with pytest.raises(LLMConfigError, match="Embedding model openai/test-embedding"):
        await embedder.embed(["hello"])
    assert len(llm_server.requests) == 1


def test_make_embedder_chooses_by_name(tmp_path: Path) -> None:
    assert isinstance(make_embedder("all-MiniLM-L6-v2"), LocalEmbedder)
    local = make_embedder("local/all-MiniLM-L6-v2", cache_dir=tmp_path)
    assert isinstance(local, LocalEmbedder)
    assert local.model_dir == tmp_path / "all-MiniLM-L6-v2"
    assert (local.model_name, local.dimension) == ("all-MiniLM-L6-v2", 384)  # known without a load
    assert not local.model_dir.exists()
    remote = make_embedder("openai/text-embedding-3-small", api_key="k")
    assert isinstance(remote, LiteLLMEmbedder)
    assert remote.dimension == 1536  # from litellm's bundled model info, offline
    with pytest.raises(LLMConfigError, match="dimension"):
        _ = make_embedder("ollama/nomic-embed-text").dimension
