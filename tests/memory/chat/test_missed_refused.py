"""Where catch-up reads on from when messages were refused (issue 33, item 4's edge): after the newest
message the bot acted on, never after a refused one; in a DM holding only refused messages, from just
before the first of them (each is read as refused, and whatever came after it as missed)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.missed import MissedMessageLog
from memory.chat.turns import ChatRequest
from memory.conversations import Venue
from memory.owners.personalities import PersonalityService
from memory.types import MessageRole
from testkit.chat import chat_request
from tests.memory.chat.test_missed import log

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def refused(personality_id: int, channel_id: str, message_id: str, *, user: str = "A") -> ChatRequest:
    """A user's message in a DM or channel outside any guild, refused as too fast."""
    return chat_request(
        personality_id,
        "too fast",
        user_id=user,
        guild_id=None,
        channel_id=channel_id,
        message_id=message_id,
        created_at=NOW,
    )


async def test_a_refused_message_marks_no_place_as_read(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    lilith, _ = await PersonalityService(sessionmaker).create("Lilith")
    missed = MissedMessageLog(sessionmaker)
    user, assistant = MessageRole.USER, MessageRole.ASSISTANT
    await log(sessionmaker, lilith.id, Venue(None, "300", "A"), ("5000", user), ("5001", assistant))
    assert await missed.refuse(refused(lilith.id, "300", "5009"))  # after it: 5002-5008 never seen
    assert await missed.refuse(refused(lilith.id, "400", "7000", user="B"))  # B's DM: refused only
    assert await missed.refuse(refused(lilith.id, "400", "7005", user="B"))
    places = {p.channel_id: p.after_message_id for p in await missed.places_to_read()}
    assert places == {"300": 5001, "400": 6999}
    assert await missed.refused_among("300", ["5000", "5001", "5009", "5010"]) == {"5009"}
    assert await missed.refused_among("400", ["5009", "7005"]) == {"7005"}  # of that channel only
