"""Answers before questions (issue 31): for a question, the memory that holds the asked-for kind of
thing ranks above the memory of the user asking the same question. Real PostgreSQL, Qdrant Edge and
the local embedder, through formation and MemoryService.recall."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from testkit.memory_service import add_chat, add_personality


async def test_the_memory_holding_the_answer_ranks_above_the_one_asking(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    turns = [
        ("user", "My dog is called Biscuit, she is a beagle."),
        ("assistant", "What a lovely name."),
        ("user", "I bought a new lamp for the living room."),
        ("assistant", "Nice."),
        ("user", "What is my dog called? I can't remember if I told you."),
        ("assistant", "Hmm, I'm not sure you did, what is she called?"),
    ]
    await add_chat(sessionmaker, p, turns, prefix="d")
    await service.form_pending()
    for query in ("What is my dog called?", "what's my dog's name"):
        found = await service.recall(personality_id=p.id, user_id="u1", query=query, limit=5)
        assert "Biscuit" in found[0].content, [m.content for m in found]


async def test_asked_about_someone_else_the_answer_in_the_reply_is_the_memorys_point(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    """Only a question about the user is asked again by the user's own question: asked about the
    personality (or anyone else), the reply to it holds the answer (LoCoMo's two-speaker talks)."""
    p = await add_personality(sessionmaker, "Sage")
    turns = [
        ("user", "How long have you been married, Sage?"),
        ("assistant", "Twelve years this spring, to Rowan the potter."),
        ("user", "My sister got married last June in Porto."),
        ("assistant", "Congratulations to her!"),
    ]
    await add_chat(sessionmaker, p, turns, prefix="m")
    await service.form_pending()
    found = await service.recall(
        personality_id=p.id, user_id="u1", query="How long has Sage been married?", limit=5
    )
    assert "Rowan" in found[0].content, [m.content for m in found]
