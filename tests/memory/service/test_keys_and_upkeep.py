"""What recall finds a memory by (its date, the line it answers, the exchange's own words), kept the
same by a reindex; the storage figures, drift and a reindex onto another embedding model."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.llm import LLMClient
from memory.recall.embedders import make_embedder
from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.transfer.export import MemoryExport
from testkit.llm_server import LLMTestServer
from testkit.memory_service import add_chat, add_personality, keyword_hits, make_service, memories
from tests.memory.service.exchanges import FAITHFUL_SUMMARY, LONG_REPLY, LONG_USER, summary_responder


async def test_a_memory_is_keyed_by_its_date_and_the_message_it_answers(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, index: VectorIndex
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    turns = [
        ("user", "I'm planning a trip"),
        ("assistant", "Where to? Have you ever been to Kyoto?"),
        ("user", "Yes, twice!"),
        ("assistant", "Lucky you"),
    ]
    await add_chat(sessionmaker, p, turns)
    await service.form_pending()
    first, second = await memories(sessionmaker)
    assert second.content == "Alice: Yes, twice!\nLilith: Lucky you"  # the content is unchanged
    # Found by what it answers: "Kyoto" was said just before it.
    assert {i for i, _ in await keyword_hits(service, index, p, "Kyoto")} == {first.id, second.id}
    # And by its date, written out (T0 is 15 March 2024).
    assert {i for i, _ in await keyword_hits(service, index, p, "what did I do on 15 March?")} == {
        first.id,
        second.id,
    }


async def test_summarized_memories_keep_the_keywords_of_the_verbatim_exchange(
    sessionmaker: async_sessionmaker[AsyncSession],
    service: MemoryService,
    llm_server: LLMTestServer,
    index: VectorIndex,
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    await add_chat(sessionmaker, p, [("user", LONG_USER), ("assistant", LONG_REPLY)])
    llm_server.responder = summary_responder(FAITHFUL_SUMMARY)
    await service.form_pending()
    [memory] = await memories(sessionmaker)
    assert "bookshelf" not in memory.content and memory.content_verbatim is None
    # The summary dropped the bookshelf; the keyword side still has the exchange as it was said.
    assert [i for i, _ in await keyword_hits(service, index, p, "bookshelf")] == [memory.id]
    found = await service.recall(personality_id=p.id, user_id="u1", query="the bookshelf argument")
    assert [m.id for m in found] == [memory.id]


async def test_reindex_keys_memories_exactly_as_formation_did(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, index: VectorIndex
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    turns = [
        ("user", "Have you been to Kyoto?"),
        ("assistant", "Never"),
        ("user", "I went in May"),
        ("assistant", "Nice"),
    ]
    await add_chat(sessionmaker, p, turns)
    await service.form_pending()
    formed = [await keyword_hits(service, index, p, words) for words in ("Kyoto", "15 March 2024", "May")]
    assert all(formed)
    assert await service.reindex() == 2
    assert [
        await keyword_hits(service, index, p, words) for words in ("Kyoto", "15 March 2024", "May")
    ] == formed


async def exported_memories(sessionmaker: async_sessionmaker[AsyncSession], user_id: str) -> list[Any]:
    """The memory records of the user's JSONL export (the one `/memory export` sends)."""
    lines = await MemoryExport(sessionmaker).export_lines(user_id=user_id)
    records = [json.loads(line) for line in lines]
    return [r["memory"] for r in records if "memory" in r]


async def test_stats_reindex_and_drift(
    sessionmaker: async_sessionmaker[AsyncSession],
    service: MemoryService,
    llm_server: LLMTestServer,
    index: VectorIndex,
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    await add_chat(sessionmaker, p, [("user", LONG_USER), ("assistant", LONG_REPLY)])
    llm_server.responder = summary_responder(FAITHFUL_SUMMARY)
    await service.form_pending()
    stats = await service.stats(personality_id=p.id)
    assert stats.memories == 1 and stats.pending_messages == 0 and stats.unindexed_memories == 0
    assert stats.saving_percent > 30
    [memory] = await memories(sessionmaker)
    await index.delete([memory.id])  # the index lost a point
    assert (await service.check_drift()).missing_from_index == 1
    assert await service.reindex() == 1
    assert not (await service.check_drift()).drift
    exported = await exported_memories(sessionmaker, "u1")
    assert exported[0]["source_message_ids"] == ["m0", "m1"] and exported[0]["personality"] == "sage"


async def test_storage_figures_compare_characters_with_characters(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    # Verbatim memories store exactly their source: accented and emoji text must show no saving,
    # as it would if the source were counted in bytes and the stored text in characters.
    p = await add_personality(sessionmaker, "Lilith")
    await add_chat(sessionmaker, p, [("user", "Café naïve ☕ à Zürich 🌸"), ("assistant", "Très bien ✨")])
    await service.form_pending()
    [memory] = await memories(sessionmaker)
    assert memory.source_chars == len(memory.content) < len(memory.content.encode())
    stats = await service.stats(personality_id=p.id)
    [row] = stats.rows
    assert row.source_chars == row.stored_chars == len(memory.content)
    assert stats.saving_percent == 0.0


async def test_reindex_after_changing_the_embedding_model(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    service: MemoryService,
    llm_client: LLMClient,
    llm_server: LLMTestServer,
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    await add_chat(sessionmaker, p, [("user", "My cat Pixel is grey"), ("assistant", "Hello Pixel")])
    await service.form_pending()
    # A different model with another dimension (the test server's 64-d embeddings over HTTP).
    other = make_embedder("openai/test-embedding", api_base=llm_server.base_url, api_key="k", dimension=64)
    switched = make_service(sessionmaker, index, other, llm_client, None)
    assert await switched.reindex() == 1
    [memory] = await memories(sessionmaker)
    assert memory.embedding_model == other.model_name and memory.state == "indexed"
    assert not (await switched.check_drift()).drift
    found = await switched.recall(personality_id=p.id, user_id="u1", query="Pixel")
    assert [m.id for m in found] == [memory.id]
