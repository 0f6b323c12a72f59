"""A reply's receipt: the memories that went into its prompt, stored with it, shown to the user it
answered only, each with its own words, date and why; a regenerated reply's replace them; a memory
forgotten since is left out. Real PostgreSQL, Qdrant Edge, the local embedder."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import NotFoundError, PermissionDeniedError
from memory.recall.receipts import Reason
from memory.service import MemoryService
from models import Personality
from testkit.memory_service import add_chat, add_personality, memories

CHAT = [
    ("user", "The weather was grey all week"),
    ("assistant", "Grey weeks pass."),
    ("user", "My dog Biscuit turns 4 on May 12"),
    ("assistant", "Happy early birthday to Biscuit!"),
    ("user", "I planted tomatoes and basil in the garden"),
    ("assistant", "A classic pair."),
]
QUESTION = "When is Biscuit's birthday?"


async def asked(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, p: Personality
) -> int:
    """The chat formed into memories, then the question asked and answered (not formed yet)."""
    conversation_id = await add_chat(sessionmaker, p, CHAT)
    await service.form_pending()
    await add_chat(
        sessionmaker, p, [("user", QUESTION), ("assistant", "May 12!"), ("assistant", "(part 2)")], prefix="q"
    )
    return conversation_id


async def test_the_user_answered_sees_the_memories_of_the_reply_in_prompt_order(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    conversation_id = await asked(sessionmaker, service, p)
    recalled = await service.recall(personality_id=p.id, user_id="u1", query=QUESTION, limit=2)
    hits = [m.id for m in recalled]
    around = [c.id for m in recalled for c in m.context if c.id not in hits]
    assert recalled[0].content.startswith("Alice: My dog Biscuit") and around  # a neighbour came with it
    stored = await service.record_reply_memories(
        conversation_id=conversation_id, message_id="q0", memories=recalled
    )
    assert stored == len(set(hits + around))

    # By any part of the reply, or by the message it answers: the same receipt.
    for message_id in ("q1", "q2", "q0"):
        receipt = await service.reply_receipt(user_id="u1", message_id=message_id)
        assert (receipt.conversation_id, receipt.answered_message_id, receipt.forgotten) == (
            conversation_id,
            "q0",
            0,
        )
        assert [m.id for m in receipt.memories if m.reason is Reason.RANK] == hits
    by_id = {m.id: m for m in await memories(sessionmaker)}
    first = receipt.memories[0]
    # Its own words (never its context's), its date, why, whether pinned.
    assert first.content == by_id[first.id].content == recalled[0].content != recalled[0].text_with_context
    assert (first.occurred_at, first.rank, first.pinned) == (by_id[first.id].occurred_at, 1, False)
    assert {m.id for m in receipt.memories if m.reason is Reason.CONTEXT} == set(around)
    assert all(m.rank == 1 for m in receipt.memories if m.id in around[:1])

    # Anyone else is refused; an unknown message is not found.
    with pytest.raises(PermissionDeniedError):
        await service.reply_receipt(user_id="u2", message_id="q1")
    with pytest.raises(NotFoundError):
        await service.reply_receipt(user_id="u1", message_id="nope")


async def test_a_regenerated_reply_shows_its_own_memories_and_a_forgotten_one_is_left_out(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    conversation_id = await asked(sessionmaker, service, p)
    recalled = await service.recall(personality_id=p.id, user_id="u1", query=QUESTION, limit=1)
    await service.record_reply_memories(conversation_id=conversation_id, message_id="q0", memories=recalled)
    # 🔄: the new answer used other memories (here: a pinned one, and nothing else).
    garden = next(m for m in await memories(sessionmaker) if "tomatoes" in m.content)
    await service.set_pinned(user_id="u1", memory_id=garden.id, pinned=True)
    again = await service.recall(personality_id=p.id, user_id="u1", query="tomatoes in my garden", limit=1)
    assert again[0].id == garden.id and again[0].pinned_first
    await service.record_reply_memories(conversation_id=conversation_id, message_id="q0", memories=again)
    receipt = await service.reply_receipt(user_id="u1", message_id="q1")
    assert [(m.id, m.reason, m.pinned) for m in receipt.memories if m.reason is not Reason.CONTEXT] == [
        (garden.id, Reason.PINNED, True)
    ]
    # Forgotten since: no longer shown, counted.
    await service.forget(user_id="u1", memory_ids=[garden.id])
    receipt = await service.reply_receipt(user_id="u1", message_id="q1")
    assert garden.id not in {m.id for m in receipt.memories} and receipt.forgotten == 1
    # A reply that used none.
    await service.record_reply_memories(conversation_id=conversation_id, message_id="q0", memories=[])
    empty = await service.reply_receipt(user_id="u1", message_id="q2")
    assert (empty.memories, empty.forgotten) == ([], 0)


async def test_only_the_answered_users_memories_are_recorded(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    await add_chat(sessionmaker, p, CHAT[2:4], user_id="u2", user_name="Bob", prefix="b")
    conversation_id = await asked(sessionmaker, service, p)
    bobs = await service.recall(personality_id=p.id, user_id="u2", query=QUESTION, limit=1)
    alices = await service.recall(personality_id=p.id, user_id="u1", query=QUESTION, limit=1)
    assert bobs and alices
    stored = await service.record_reply_memories(
        conversation_id=conversation_id, message_id="q0", memories=[*bobs, *alices]
    )
    receipt = await service.reply_receipt(user_id="u1", message_id="q0")
    assert stored == len(receipt.memories) and bobs[0].id not in {m.id for m in receipt.memories}
    with pytest.raises(NotFoundError):
        await service.record_reply_memories(conversation_id=conversation_id, message_id="q1", memories=alices)
