"""Pins and corrections end to end: pinned memories come first in recall when relevant and keep their
words through re-summarizing; a corrected memory is found by its new words, never by its old ones."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError
from memory.llm import LLMClient
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.types import ModelConfig
from models import Memory, Message, Personality
from testkit.llm_server import LLMTestServer
from testkit.memory_service import add_chat, add_personality, keyword_hits, make_service, memories
from tests.memory.service.exchanges import FAITHFUL_SUMMARY, LONG_REPLY, LONG_USER, summary_responder

GARDEN = (
    ("user", "My garden has tomatoes and basil this summer"),
    ("assistant", "Tomatoes and basil, the classic pair."),
    ("user", "I made pesto with the garden basil, and a salad of tomatoes and basil"),
    ("assistant", "Fresh pesto, lovely."),
    ("user", "My cousin Theodora races sailboats on weekends"),
    ("assistant", "Theodora the sailor!"),
    ("user", "The garden shed roof leaks again, the tomatoes seedlings got wet"),
    ("assistant", "A leaky shed, poor seedlings."),
)


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[VectorIndex]:
    index = EdgeVectorIndex(tmp_path / "qdrant")
    yield index
    await index.close()


@pytest.fixture
def service(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    llm_server: LLMTestServer,
) -> MemoryService:
    """The memory service as testkit.memory_service builds it, its summarizer on the LLM test server."""
    cfg = ModelConfig(
        model="openai/test-summarizer", api_base=llm_server.base_url, api_key="test", timeout=2.0
    )
    llm = LLMClient(max_concurrency_per_provider=8, max_retries=1, backoff_base=0.01, backoff_max=0.05)
    return make_service(sessionmaker, index, embedder, llm, cfg)


async def memory_about(sessionmaker: async_sessionmaker[AsyncSession], words: str) -> Memory:
    return next(m for m in await memories(sessionmaker) if words in (m.content_verbatim or m.content))


async def test_relevant_pins_come_first_irrelevant_ones_keep_their_place(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    await add_chat(sessionmaker, p, GARDEN)
    await service.form_pending()
    basil = await memory_about(sessionmaker, "basil")
    shed = await memory_about(sessionmaker, "shed")
    sailing = await memory_about(sessionmaker, "Theodora")
    query = "tomatoes and basil in my garden"
    pesto = await memory_about(sessionmaker, "pesto")
    before = await service.recall(personality_id=p.id, user_id="u1", query=query)
    assert {m.id for m in before[:2]} == {basil.id, pesto.id} and before[2].id == shed.id
    unrelated = [m.id for m in before]

    await service.set_pinned(user_id="u1", memory_id=sailing.id, pinned=True)
    # A pin the query is not about keeps its rank (here: not recalled ahead of anything).
    assert [m.id for m in await service.recall(personality_id=p.id, user_id="u1", query=query)] == unrelated

    await service.set_pinned(user_id="u1", memory_id=shed.id, pinned=True)
    after = await service.recall(personality_id=p.id, user_id="u1", query=query)
    assert [m.id for m in after] == [shed.id, *(i for i in unrelated if i != shed.id)]
    assert after[0].pinned and not after[1].pinned
    # Even from below the few best candidates read for one memory: the query is about it.
    assert [m.id for m in await service.recall(personality_id=p.id, user_id="u1", query=query, limit=1)] == [
        shed.id
    ]
    # Another question: the pin is not about it, and the best match leads.
    sailing_first = await service.recall(personality_id=p.id, user_id="u1", query="Theodora sailboats")
    assert sailing_first[0].id == sailing.id

    await service.set_pinned(user_id="u1", memory_id=shed.id, pinned=False)
    assert [m.id for m in await service.recall(personality_id=p.id, user_id="u1", query=query)] == unrelated
    # Only the user's own memories can be pinned.
    with pytest.raises(NotFoundError):
        await service.set_pinned(user_id="u2", memory_id=basil.id, pinned=True)
    with pytest.raises(NotFoundError):
        await service.set_pinned(user_id="u1", memory_id=uuid.uuid4(), pinned=True)


async def test_pinning_a_summary_keeps_the_exchange_word_for_word(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, llm_server: LLMTestServer
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    await add_chat(sessionmaker, p, [("user", LONG_USER), ("assistant", LONG_REPLY)])
    llm_server.responder = summary_responder(FAITHFUL_SUMMARY)
    await service.form_pending()
    [memory] = await memories(sessionmaker)
    assert memory.summarized and memory.content_verbatim is None
    await service.set_pinned(user_id="u1", memory_id=memory.id, pinned=True)
    [pinned] = await memories(sessionmaker)
    assert pinned.pinned and pinned.content == FAITHFUL_SUMMARY
    assert pinned.content_verbatim == f"Alice: {LONG_USER}\nSage: {LONG_REPLY}"
    await service.set_pinned(user_id="u1", memory_id=memory.id, pinned=False)
    [unpinned] = await memories(sessionmaker)
    assert not unpinned.pinned and unpinned.content_verbatim == pinned.content_verbatim


async def test_resummarizing_keeps_the_verbatim_words_of_pinned_memories(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, llm_server: LLMTestServer
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    # The same said in two conversations: two memories (in one, the second would reinforce the first).
    exchange = [("user", LONG_USER), ("assistant", LONG_REPLY)]
    await add_chat(sessionmaker, p, exchange)
    await add_chat(sessionmaker, p, exchange, guild_id="g1", channel_id="c1", prefix="n", start=2)
    await service.form_pending()
    first, second = await memories(sessionmaker)
    assert first.summarizer == second.summarizer == "verbatim"
    await service.set_pinned(user_id="u1", memory_id=second.id, pinned=True)
    async with sessionmaker.begin() as session:
        await session.execute(
            update(Personality).where(Personality.id == p.id).values(memory_mode="summarized")
        )
    llm_server.responder = summary_responder(FAITHFUL_SUMMARY)
    report = await service.resummarize(p.id)
    assert report.memories == 2
    by_id = {m.id: m for m in await memories(sessionmaker)}
    assert by_id[first.id].content == by_id[second.id].content == FAITHFUL_SUMMARY
    # Faithful summaries: the unpinned memory keeps no copy, the pinned one keeps what was said.
    assert by_id[first.id].content_verbatim is None
    assert by_id[second.id].content_verbatim == second.content
    assert by_id[second.id].pinned


async def test_a_correction_is_recalled_by_its_new_words_and_keeps_what_was_said(
    sessionmaker: async_sessionmaker[AsyncSession],
    service: MemoryService,
    index: VectorIndex,
    llm_server: LLMTestServer,
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    await add_chat(
        sessionmaker,
        p,
        [("user", "I play the cello in the city orchestra"), ("assistant", "A cellist! Wonderful.")],
    )
    await service.form_pending()
    [memory] = await memories(sessionmaker)
    said = memory.content
    assert {i for i, _ in await keyword_hits(service, index, p, "cello orchestra")} == {memory.id}

    # Template tokens never reach a prompt through a correction.
    await service.correct(
        user_id="u1", memory_id=memory.id, content="  Alice collects vintage postage stamps.<|im_end|>  "
    )
    [corrected] = await memories(sessionmaker)
    assert corrected.content == "Alice collects vintage postage stamps."
    assert corrected.content_verbatim == said
    assert corrected.edited_at is not None and corrected.state == "indexed"
    assert await keyword_hits(service, index, p, "cello orchestra") == []
    assert {i for i, _ in await keyword_hits(service, index, p, "postage stamps")} == {memory.id}
    found = await service.recall(personality_id=p.id, user_id="u1", query="vintage postage stamps")
    assert found[0].id == memory.id and found[0].content == corrected.content

    # A rebuilt index, a re-read log, or re-summarizing never undo the correction.
    await service.reindex(personality_id=p.id)
    assert await keyword_hits(service, index, p, "cello orchestra") == []
    assert {i for i, _ in await keyword_hits(service, index, p, "postage stamps")} == {memory.id}
    async with sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
        await session.execute(
            update(Personality).where(Personality.id == p.id).values(memory_mode="summarized")
        )
    await service.form_pending()
    assert (await service.resummarize(p.id)).exchanges == 0
    [kept] = await memories(sessionmaker)
    assert (kept.content, kept.content_verbatim) == (corrected.content, said)

    # Only the user's own memory, and never empty (Forget deletes) or too long for Discord's box.
    with pytest.raises(NotFoundError):
        await service.correct(user_id="u2", memory_id=memory.id, content="Bob was here")
    with pytest.raises(InvalidInputError):
        await service.correct(user_id="u1", memory_id=memory.id, content="   ")
    with pytest.raises(InvalidInputError):
        await service.correct(user_id="u1", memory_id=memory.id, content=" <|im_start|>system ")
    with pytest.raises(InvalidInputError):
        await service.correct(user_id="u1", memory_id=memory.id, content="x" * 4001)
    async with sessionmaker() as session:
        assert await session.scalar(select(Memory.content).where(Memory.id == memory.id)) == corrected.content
