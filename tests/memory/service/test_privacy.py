"""Whose memories recall may return, and forgetting: isolation between users, personalities and
venues; a forgotten memory or unformed exchange never comes back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.transfer.export import MemoryExport
from models import Memory, Message, UserSettings
from testkit.memory_service import add_chat, add_personality, keyword_hits, memories


async def test_isolation_between_users_personalities_and_venues(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    lilith = await add_personality(sessionmaker, "Lilith")
    sage = await add_personality(sessionmaker, "Sage")
    secret = [("user", "My secret password hint is purple giraffe"), ("assistant", "Safe with me")]
    await add_chat(sessionmaker, lilith, secret, user_id="alice", guild_id="g1", channel_id="c1", prefix="a")
    await add_chat(
        sessionmaker,
        lilith,
        [("user", "I love purple giraffes too"), ("assistant", "ha")],
        user_id="bob",
        guild_id="g1",
        channel_id="c1",
        prefix="b",
        start=10,
    )
    await add_chat(
        sessionmaker,
        lilith,
        [("user", "In private: my giraffe is named Purple Pete"), ("assistant", "cute")],
        user_id="alice",
        prefix="d",
    )
    await add_chat(
        sessionmaker,
        lilith,
        [("user", "In guild two: purple giraffe stickers"), ("assistant", "nice")],
        user_id="alice",
        guild_id="g2",
        channel_id="c2",
        prefix="e",
    )
    await service.form_pending()

    async def recall(**kwargs: Any) -> set[str]:
        found = await service.recall(query="purple giraffe", limit=10, **kwargs)
        return {m.source_message_ids[0] for m in found}

    # Each user only ever gets their own memories.
    assert await recall(personality_id=lilith.id, user_id="bob", guild_id="g1") == {"b10"}
    # Another personality knows nothing of Lilith's conversations.
    assert await recall(personality_id=sage.id, user_id="alice") == set()
    # In guild g1: g1 memories only; DM memories stay private; g2 stays in g2.
    assert await recall(personality_id=lilith.id, user_id="alice", guild_id="g1") == {"a0"}
    # In a DM: all of the user's own memories.
    assert await recall(personality_id=lilith.id, user_id="alice") == {"a0", "d0", "e0"}
    # A user may allow their DM memories in guilds.
    async with sessionmaker.begin() as session:
        session.add(UserSettings(user_id="alice", allow_dm_recall_in_guilds=True))
    assert await recall(personality_id=lilith.id, user_id="alice", guild_id="g1") == {"a0", "d0"}
    # Taking it back is obeyed at once: the setting is read with every recall, never kept.
    async with sessionmaker.begin() as session:
        await session.execute(update(UserSettings).values(allow_dm_recall_in_guilds=False))
    assert await recall(personality_id=lilith.id, user_id="alice", guild_id="g1") == {"a0"}


async def test_forgotten_memory_never_returns(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    turns = [
        ("user", "my bank PIN hint is the lighthouse"),
        ("assistant", "ok"),
        ("user", "and I like tea"),
        ("assistant", "ok"),
    ]
    await add_chat(sessionmaker, p, turns)
    await service.form_pending()
    pin = next(m for m in await memories(sessionmaker) if "lighthouse" in m.content)
    assert await service.forget(user_id="u2", memory_ids=[pin.id]) == 0  # not theirs
    assert await service.forget(user_id="u1", memory_ids=[pin.id]) == 1
    found = await service.recall(personality_id=p.id, user_id="u1", query="lighthouse PIN")
    assert pin.id not in {m.id for m in found}
    # The same messages formed again (a re-import) do not bring it back.
    async with sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
    await service.form_pending()
    found = await service.recall(personality_id=p.id, user_id="u1", query="lighthouse PIN")
    assert pin.id not in {m.id for m in found}
    async with sessionmaker() as session:
        row = await session.get(Memory, pin.id)
    assert row is not None and row.state == "deleted" and row.content == ""
    assert not (await service.check_drift()).drift
    assert await service.forget(user_id="u1", personality_id=p.id) == 1  # the tea one
    assert await MemoryExport(sessionmaker).export_lines(user_id="u1") == []


async def messages_of(sessionmaker: async_sessionmaker[AsyncSession]) -> dict[str, Message]:
    async with sessionmaker() as session:
        return {m.external_id: m for m in (await session.scalars(select(Message))).all()}


async def test_unform_with_exclusion_forgets_the_exchange_for_good(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, index: VectorIndex
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    conversation = await add_chat(
        sessionmaker,
        p,
        [
            ("user", "I keep bees on the roof"),
            ("user", "Their queen is called Hortensia"),
            ("assistant", "Hortensia the queen bee!"),
            ("user", "I also play the oboe"),
            ("assistant", "The oboe, what a lovely sound."),
        ],
    )
    await service.form_pending()
    bees, oboe = await memories(sessionmaker)
    assert bees.source_message_ids == ["m0", "m1", "m2"]
    # The next exchange is keyed with the line said before it, the queen's name.
    assert {i for i, _ in await keyword_hits(service, index, p, "Hortensia")} == {bees.id, oboe.id}
    # By the reply alone: the whole exchange goes, the unanswered line taken into it included.
    assert await service.unform(conversation_id=conversation, external_ids=["m2"], exclude=True) == 1
    assert await service.unform(conversation_id=conversation, external_ids=["m2"], exclude=True) == 0
    rows = await messages_of(sessionmaker)
    assert {i: rows[i].memory_excluded for i in rows} == {
        "m0": "forgotten",
        "m1": "forgotten",
        "m2": "forgotten",
        "m3": None,
        "m4": None,
    }
    assert all(m.memory_processed_at is not None for m in rows.values())
    assert bees.id not in await service._store.index.ids(p.id)
    assert {m.id: m.state for m in await memories(sessionmaker)} == {bees.id: "deleted", oboe.id: "indexed"}
    # Forgotten words key no memory any more, not even the next one.
    assert await keyword_hits(service, index, p, "Hortensia") == []
    recalled = await service.recall(personality_id=p.id, user_id="u1", query="Hortensia queen bee")
    assert bees.id not in {m.id for m in recalled}
    # Whatever reads the log again (a catch-up, a worker) never forms it: it is excluded.
    async with sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
    await service.form_pending()
    assert {m.id: m.state for m in await memories(sessionmaker)} == {bees.id: "deleted", oboe.id: "indexed"}
    assert await keyword_hits(service, index, p, "Hortensia") == []


async def test_unform_without_exclusion_forms_the_exchange_anew(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, index: VectorIndex
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    conversation = await add_chat(
        sessionmaker,
        p,
        [("user", "Name my new kitten"), ("assistant", "Call her Pumpernickel")],
    )
    await service.form_pending()
    [before] = await memories(sessionmaker)
    assert await service.unform(conversation_id=conversation, external_ids=["m1"], exclude=False) == 1
    assert await memories(sessionmaker) == []  # no tombstone: the same exchange may form again
    rows = await messages_of(sessionmaker)
    assert [(m.memory_processed_at, m.memory_excluded) for m in rows.values()] == [(None, None)] * 2
    assert before.id not in await service._store.index.ids(p.id)
    # A regenerated reply replaces the old one in the log; formation forms the exchange with it.
    async with sessionmaker.begin() as session:
        await session.execute(
            update(Message).where(Message.external_id == "m1").values(content="Call her Clementine")
        )
    report = await service.form_pending()
    assert report.memories == 1
    [after] = await memories(sessionmaker)
    assert after.id == before.id and after.state == "indexed"
    assert "Clementine" in after.content and "Pumpernickel" not in after.content
    found = await service.recall(personality_id=p.id, user_id="u1", query="Clementine kitten")
    assert [m.id for m in found] == [after.id]
    assert await keyword_hits(service, index, p, "Pumpernickel") == []
