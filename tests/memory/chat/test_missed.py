"""What the bot missed while offline, as the domain sees it: which places to read again and from where,
which missed message is still worth an answer, and where remembered messages were said."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.missed import MissedMessageLog, deserves_answer
from memory.conversations import Venue, ensure_conversation
from memory.owners.bindings import BindingService
from memory.owners.personalities import PersonalityService
from memory.types import MessageRole
from models import Message

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def log(
    sessionmaker: async_sessionmaker[AsyncSession],
    personality_id: int,
    venue: Venue,
    *messages: tuple[str, MessageRole],
) -> None:
    async with sessionmaker.begin() as session:
        conversation_id = await ensure_conversation(session, personality_id, venue)
        for external_id, role in messages:
            session.add(
                Message(
                    conversation_id=conversation_id,
                    external_id=external_id,
                    author_id=venue.user_id if role is MessageRole.USER else "personality:lilith",
                    author_name="Alice",
                    role=role.value,
                    content=f"message {external_id}",
                    created_at=NOW,
                )
            )


async def test_places_are_bound_channels_and_dm_channels_read_on_from_the_newest_snowflake(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    lilith, _ = await PersonalityService(sessionmaker).create("Lilith")
    bindings = BindingService(sessionmaker)
    await bindings.bind(personality_id=lilith.id, channel_id="100", guild_id="7", user_id="1")
    await bindings.bind(personality_id=lilith.id, channel_id="200", guild_id="7", user_id="1")
    user, assistant = MessageRole.USER, MessageRole.ASSISTANT
    # Snowflakes compare as numbers ("998" < "1001"); ids an import made up are not snowflakes.
    await log(sessionmaker, lilith.id, Venue("7", "100", "A"), ("998", user), ("1001", assistant))
    await log(sessionmaker, lilith.id, Venue(None, "300", "A"), ("5000", user), ("import-9", assistant))
    await log(sessionmaker, lilith.id, Venue(None, "400", "B"), ("import-1", user))  # imported only
    await log(sessionmaker, lilith.id, Venue("7", "500", "A"), ("6000", user))  # named, never bound
    places = {p.channel_id: p for p in await MissedMessageLog(sessionmaker).places_to_read()}
    assert sorted(places) == ["100", "200", "300"]
    assert (places["100"].after_message_id, places["100"].since) == (1001, None)
    assert places["200"].after_message_id is None and places["200"].since is not None  # since bound
    assert places["300"].after_message_id == 5000

    # The channels the bot can read in its guilds: each after its own newest, or its guild's; a guild
    # where nothing is stored gives nothing to read on from.
    readable = {"7": ["100", "500", "600"], "8": ["700"]}
    places = {p.channel_id: p for p in await MissedMessageLog(sessionmaker).places_to_read(readable)}
    assert sorted(places) == ["100", "200", "300", "500", "600"]
    assert places["500"].after_message_id == 6000  # named there, never bound: its own newest
    assert places["600"].after_message_id == 6000  # nothing stored there: the guild's newest


def test_only_recent_missed_messages_deserve_an_answer() -> None:
    window = timedelta(minutes=10)
    assert deserves_answer(NOW - timedelta(minutes=9), now=NOW, window=window)
    assert not deserves_answer(NOW - timedelta(minutes=11), now=NOW, window=window)


async def test_last_request_and_remembered_places(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    lilith, _ = await PersonalityService(sessionmaker).create("Lilith")
    user, assistant = MessageRole.USER, MessageRole.ASSISTANT
    await log(sessionmaker, lilith.id, Venue("7", "100", "A"), ("11", user), ("12", assistant), ("13", user))
    request = await MissedMessageLog(sessionmaker).last_request(personality_id=lilith.id, channel_id="100")
    assert request is not None
    assert (request.message_id, request.user_id, request.guild_id, request.channel_id) == (
        "13",
        "A",
        "7",
        "100",
    )
    assert (
        await MissedMessageLog(sessionmaker).last_request(personality_id=lilith.id, channel_id="999") is None
    )
    async with sessionmaker.begin() as session:
        await session.execute(
            update(Message).where(Message.external_id == "11").values(memory_processed_at=NOW)
        )
    # Only remembered user messages, by Discord id: "13" waits, "x" is no Discord id.
    assert await MissedMessageLog(sessionmaker).remembered_places(["11", "13", "x"]) == [("100", "11")]
