"""The message log's identities: which venue is which conversation, and which id is which message."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import LoggedMessage, MessageIdCollision, Venue, ensure_conversation, store_messages
from memory.owners.personalities import PersonalityService
from memory.types import MessageRole
from models import Message

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def said(external_id: str, author: str, text: str, reply_to: str | None = None) -> LoggedMessage:
    role = MessageRole.ASSISTANT if author == "bot" else MessageRole.USER
    return LoggedMessage(external_id, author, author, role, text, T0, reply_to=reply_to)


@pytest.fixture
async def conversation(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    lilith, _ = await PersonalityService(sessionmaker).create("Lilith")
    async with sessionmaker.begin() as session:
        return await ensure_conversation(session, lilith.id, Venue("7", "55", "A"))


async def stored(sessionmaker: async_sessionmaker[AsyncSession]) -> list[tuple[str, str, str]]:
    async with sessionmaker() as session:
        rows = await session.execute(
            select(Message.external_id, Message.author_id, Message.content).order_by(Message.id)
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


def test_a_dm_a_guild_without_channel_and_two_guilds_channels_are_four_venues() -> None:
    venues = [
        Venue(None, None, "42"),
        Venue("G1", None, "42"),
        Venue("G1", "55", "42"),
        Venue("G2", "55", "42"),
    ]
    assert len({v.key for v in venues}) == 4
    # A DM's channel does not matter (the DM is the user's), nor does a guild channel's user.
    assert Venue(None, "d1", "42").key == Venue(None, "d2", "42").key
    assert Venue("G1", "55", "42").key == Venue("G1", "55", "43").key


async def test_an_id_of_another_author_is_refused_whatever_the_ids_are(
    sessionmaker: async_sessionmaker[AsyncSession], conversation: int
) -> None:
    async with sessionmaker.begin() as session:
        await store_messages(
            session, conversation, [said("1", "A", "my PIN is 4921"), said("2", "bot", "noted")]
        )
    for exact in (False, True):
        with pytest.raises(MessageIdCollision) as refused:
            async with sessionmaker.begin() as session:
                await store_messages(
                    session, conversation, [said("3", "B", "hi"), said("1", "B", "a good book?")], exact=exact
                )
        assert (refused.value.external_id, refused.value.index, refused.value.reason) == (
            "1",
            1,
            "said by someone else",
        )
    with pytest.raises(MessageIdCollision, match="a reply there"):
        async with sessionmaker.begin() as session:
            await store_messages(session, conversation, [said("2", "A", "hello")])
    assert await stored(sessionmaker) == [("1", "A", "my PIN is 4921"), ("2", "bot", "noted")]


async def test_with_exact_ids_other_words_or_another_answer_are_another_message(
    sessionmaker: async_sessionmaker[AsyncSession], conversation: int
) -> None:
    first = [said("1", "A", "hi"), said("5", "B", "yo"), said("2", "bot", "hello", reply_to="1")]
    async with sessionmaker.begin() as session:
        assert await store_messages(session, conversation, first, exact=True) == 3
    async with sessionmaker.begin() as session:  # the same messages again: nothing new, no refusal
        assert await store_messages(session, conversation, first, exact=True) == 0
    with pytest.raises(MessageIdCollision, match="with other words"):
        async with sessionmaker.begin() as session:
            await store_messages(session, conversation, [said("1", "A", "hi!")], exact=True)
    with pytest.raises(MessageIdCollision, match="answering '1'"):
        async with sessionmaker.begin() as session:
            await store_messages(session, conversation, [said("2", "bot", "hello", reply_to="5")], exact=True)
    with pytest.raises(MessageIdCollision, match="with other words"):  # the same id twice in one batch
        async with sessionmaker.begin() as session:
            await store_messages(
                session, conversation, [said("8", "A", "x"), said("8", "A", "y")], exact=True
            )
    # Discord's ids name one message for good: its words may have been edited since.
    async with sessionmaker.begin() as session:
        assert await store_messages(session, conversation, [said("1", "A", "hi (edited)")]) == 0
    assert await stored(sessionmaker) == [("1", "A", "hi"), ("5", "B", "yo"), ("2", "bot", "hello")]
