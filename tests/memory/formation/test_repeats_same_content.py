"""Repeats only for the same content (issue 30): two memories fold together only when their exchanges
say the same thing, never because their summaries do ("Alice told Sage about her plans" for two
different exchanges). Real PostgreSQL, Qdrant Edge, the local embedder, the summarizer over HTTP."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from testkit.llm_server import LLMTestServer
from testkit.memory_service import add_chat, add_personality, memories

VAGUE = "Alice told Sage about her plans."


async def test_two_vague_summaries_of_different_exchanges_stay_two_memories(
    sessionmaker: async_sessionmaker[AsyncSession],
    summarizing_service: MemoryService,
    llm_server: LLMTestServer,
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    llm_server.responder = lambda body: VAGUE
    turns = [
        ("user", "My plans: learn to knit scarves and mittens for the whole family."),
        ("assistant", "How lovely, start with something simple."),
        ("user", "New plans: repainting the kitchen cupboards a deep olive green colour."),
        ("assistant", "Olive green will look lovely."),
    ]
    await add_chat(sessionmaker, p, turns)
    report = await summarizing_service.form_pending()
    formed = await memories(sessionmaker)
    assert [m.content for m in formed] == [VAGUE, VAGUE] and report.repeats == 0
    assert all(m.times_said == 1 for m in formed)
