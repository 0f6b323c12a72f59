"""Incognito spans and what the message log marks under them: real PostgreSQL, spans moved in time by
the service's clock (never by sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.errors import InvalidInputError
from memory.owners.incognito import IncognitoService
from memory.owners.personalities import PersonalityService
from memory.types import MessageRole
from models import IncognitoSession, Message, Personality

NOW = datetime.now(UTC)


@pytest.fixture
async def two(sessionmaker: async_sessionmaker[AsyncSession]) -> tuple[Personality, Personality]:
    personalities = PersonalityService(sessionmaker)
    sage, _ = await personalities.create("Sage")
    lilith, _ = await personalities.create("Lilith")
    return sage, lilith


def clock_at(sessionmaker: async_sessionmaker[AsyncSession], moment: datetime) -> IncognitoService:
    """The service as it would run at `moment`."""
    return IncognitoService(sessionmaker, clock=lambda: moment)


def said(
    external_id: str, author: str, minutes: float, role: MessageRole = MessageRole.USER
) -> LoggedMessage:
    return LoggedMessage(
        external_id=external_id,
        author_id=author,
        author_name=author.title(),
        role=role,
        content=f"{author} says {external_id}",
        created_at=NOW + timedelta(minutes=minutes),
        reply_to=None,
    )


async def store(
    sessionmaker: async_sessionmaker[AsyncSession], personality: Personality, *messages: LoggedMessage
) -> dict[str, str | None]:
    """Store the messages in the personality's channel conversation; every message's exclusion."""
    async with sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, personality.id, Venue("7", "55", "alice"))
        await store_messages(session, conversation, list(messages))
    async with sessionmaker() as session:
        rows = await session.scalars(select(Message).where(Message.conversation_id == conversation))
        return {m.external_id: m.memory_excluded for m in rows}


async def test_on_for_one_personality_or_all_and_off(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, lilith = two
    service = IncognitoService(sessionmaker)
    assert await service.active("alice", sage.id) is None and await service.current("alice") == []

    span = await service.start("alice", sage.id, None)
    assert (span.personality_id, span.personality_name, span.ends_at) == (sage.id, "Sage", None)
    assert (await service.active("alice", sage.id)) == span
    assert await service.active("alice", lilith.id) is None
    assert await service.active("bob", sage.id) is None  # only her own

    everywhere = await service.start("alice", None, timedelta(hours=1))
    assert everywhere.personality_id is None and everywhere.ends_at is not None
    assert (await service.active("alice", lilith.id)) == everywhere
    # The one that lasts longest answers: Sage's span has no end.
    assert (await service.active("alice", sage.id)) == span
    assert [s.personality_name for s in await service.current("alice")] == ["Sage", None]

    # Off for Sage leaves the span for every personality on.
    assert await service.stop("alice", sage.id) == 1
    assert (await service.active("alice", sage.id)) == everywhere
    assert await service.stop("alice", sage.id) == 0
    # Off with no personality ends every span she has on.
    await service.start("alice", lilith.id, None)
    assert await service.stop("alice", None) == 2
    assert await service.current("alice") == []
    async with sessionmaker() as session:
        kept = (await session.scalars(select(IncognitoSession))).all()
    assert len(kept) == 3 and all(s.ended_at is not None for s in kept)  # rows stay, ended


async def test_on_again_changes_the_end_of_the_span_that_is_on(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, _ = two
    service = clock_at(sessionmaker, NOW)
    first = await service.start("alice", sage.id, timedelta(hours=1))
    assert first.ends_at == NOW + timedelta(hours=1)
    until_off = await service.start("alice", sage.id, None)
    assert until_off.ends_at is None and until_off.started_at == first.started_at
    async with sessionmaker() as session:
        assert len((await session.scalars(select(IncognitoSession))).all()) == 1
    with pytest.raises(InvalidInputError):
        await service.start("alice", sage.id, timedelta(0))


async def test_a_timed_span_ends_by_itself(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, _ = two
    await clock_at(sessionmaker, NOW - timedelta(hours=2)).start("alice", sage.id, timedelta(hours=1))
    assert await clock_at(sessionmaker, NOW - timedelta(minutes=61)).active("alice", sage.id) is not None
    assert await IncognitoService(sessionmaker).active("alice", sage.id) is None
    assert await IncognitoService(sessionmaker).stop("alice", None) == 0  # nothing left to turn off


async def test_the_span_starts_when_the_user_asked_unless_that_is_later_than_now(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, lilith = two
    service = clock_at(sessionmaker, NOW)
    asked = NOW - timedelta(seconds=2)
    assert (await service.start("alice", sage.id, None, asked_at=asked)).started_at == asked
    later = NOW + timedelta(seconds=2)  # a clock ahead of ours: the span still starts by now
    assert (await service.start("alice", lilith.id, None, asked_at=later)).started_at == NOW


async def test_stored_user_messages_said_in_a_span_are_marked_and_replies_to_them_too(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, lilith = two
    # Incognito with Sage from -60 to -30 minutes (timed), and with everyone from -10 until turned off at -5.
    await clock_at(sessionmaker, NOW - timedelta(minutes=60)).start("alice", sage.id, timedelta(minutes=30))
    await clock_at(sessionmaker, NOW - timedelta(minutes=10)).start("alice", None, None)
    await clock_at(sessionmaker, NOW - timedelta(minutes=5)).stop("alice", None)

    reply = MessageRole.ASSISTANT
    # One batch, as a catch-up or an import stores it, long after the spans ended.
    marks = await store(
        sessionmaker,
        sage,
        said("before", "alice", -70),
        said("r-before", "sage", -69, reply),
        said("in-sage-span", "alice", -45),
        said("r-in", "sage", -44, reply),
        said("bob-in-span", "bob", -44),
        said("between", "alice", -20),
        said("in-global-span", "alice", -8),
        said("after", "alice", -1),
    )
    assert marks == {
        "before": None,
        "r-before": None,
        "in-sage-span": "incognito",
        "r-in": "incognito",
        "bob-in-span": None,
        "between": None,
        "in-global-span": "incognito",
        "after": None,
    }
    # Sage's span does not cover Lilith; the span for everyone does.
    marks = await store(
        sessionmaker, lilith, said("l-in-sage-span", "alice", -45), said("l-in-global", "alice", -7)
    )
    assert marks == {"l-in-sage-span": None, "l-in-global": "incognito"}


async def test_a_reply_stored_later_takes_the_mark_of_the_message_it_answers(
    sessionmaker: async_sessionmaker[AsyncSession], two: tuple[Personality, Personality]
) -> None:
    sage, _ = two
    service = clock_at(sessionmaker, NOW - timedelta(minutes=10))
    await service.start("alice", sage.id, None)
    await store(sessionmaker, sage, said("secret", "alice", -2))
    await clock_at(sessionmaker, NOW - timedelta(minutes=1)).stop("alice", None)
    # The reply comes after incognito was turned off: it answers a message said incognito.
    answer = LoggedMessage("answer", "sage", "Sage", MessageRole.ASSISTANT, "noted", NOW, reply_to="secret")
    marks = await store(sessionmaker, sage, answer, said("later", "alice", 1))
    assert marks == {"secret": "incognito", "answer": "incognito", "later": None}
