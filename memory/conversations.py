"""Conversations and the message log: stored first, idempotently, before anything acts on them; and the
one reset of a conversation (its rolling summary and title; the log and long-term memories stay)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.types import MessageRole
from models import Conversation, Message, Summary


@dataclass(frozen=True, slots=True)
class Venue:
    """Where a conversation happens: a guild channel (shared), or a user's private DM."""

    guild_id: str | None
    channel_id: str | None
    user_id: str

    @property
    def is_dm(self) -> bool:
        return self.guild_id is None

    @property
    def key(self) -> str:
        # DMs (and transcripts with no channel) are per user; a guild channel is shared by its users.
        if self.is_dm or self.channel_id is None:
            return f"dm:{self.user_id}"
        return f"ch:{self.channel_id}"


async def ensure_conversation(session: AsyncSession, personality_id: int, venue: Venue) -> int:
    """The id of the personality's conversation in this venue, created if new (race-safe)."""
    statement = (
        insert(Conversation)
        .values(
            personality_id=personality_id,
            venue_key=venue.key,
            guild_id=venue.guild_id,
            channel_id=venue.channel_id,
            is_dm=venue.is_dm,
        )
        .on_conflict_do_nothing(index_elements=["personality_id", "venue_key"])
        .returning(Conversation.id)
    )
    created = await session.scalar(statement)
    if created is not None:
        return created
    existing = await session.scalar(
        select(Conversation.id).where(
            Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
        )
    )
    assert existing is not None
    return existing


@dataclass(frozen=True, slots=True)
class NewMessage:
    external_id: str
    author_id: str
    author_name: str | None
    role: MessageRole
    content: str
    created_at: datetime
    token_count: int = 0


async def store_messages(session: AsyncSession, conversation_id: int, messages: list[NewMessage]) -> int:
    """Insert messages not yet in the log (by external id); return how many were new."""
    if not messages:
        return 0
    rows = [
        {
            "conversation_id": conversation_id,
            "external_id": m.external_id,
            "author_id": m.author_id,
            "author_name": m.author_name,
            "role": m.role.value,
            "content": m.content,
            "created_at": m.created_at,
            "token_count": m.token_count,
        }
        for m in messages
    ]
    inserted = 0
    # asyncpg caps a statement at 32767 parameters: insert in slices.
    for start in range(0, len(rows), 2000):
        statement = (
            insert(Message)
            .values(rows[start : start + 2000])
            .on_conflict_do_nothing(index_elements=["conversation_id", "external_id"])
            .returning(Message.id)
        )
        inserted += len((await session.scalars(statement)).all())
    return inserted


async def find_conversation(session: AsyncSession, personality_id: int, venue: Venue) -> Conversation | None:
    return await session.scalar(
        select(Conversation).where(
            Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
        )
    )


async def reset_conversation(session: AsyncSession, personality_id: int, venue: Venue) -> int:
    """Forget the conversation's rolling summary and its title (the message log and long-term memories
    stay); returns the summary rows removed, 0 when there is no conversation here."""
    conversation = await find_conversation(session, personality_id, venue)
    if conversation is None:
        return 0
    removed = len(
        (
            await session.scalars(
                delete(Summary).where(Summary.conversation_id == conversation.id).returning(Summary.id)
            )
        ).all()
    )
    # Only a title that exists is cleared: the UPDATE locks the conversation row until commit, and
    # a lock nobody needed could only get in the way of memory formation, which claims that row.
    await session.execute(
        update(Conversation)
        .where(Conversation.id == conversation.id, Conversation.title.is_not(None))
        .values(title=None)
    )
    return removed


async def conversation_title(session: AsyncSession, personality_id: int, venue: Venue) -> str | None:
    """The title the rolling summary gave the conversation here, if any."""
    return await session.scalar(
        select(Conversation.title).where(
            Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
        )
    )
