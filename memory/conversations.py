"""Conversations and the message log: stored first, idempotently, before anything acts on them, each
reply linked to the user message it answers, text made storable on the way in, and what a user said
while incognito marked so it never becomes a memory (memory.exclusions); and the one reset of a
conversation (its rolling summary and title; the log and long-term memories stay), and a new
conversation in a venue.

A message is known by its id within its conversation. An id the log already holds is that message
again only if it is one: the same author and role (and, for ids that are only a file's, the same words
answering the same message); anything else is refused (`MessageIdCollision`), never stored as, or
linked to, the other one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.errors import InvalidInputError
from memory.exclusions import INCOGNITO as INCOGNITO
from memory.exclusions import incognito_span_covers as incognito_span_covers
from memory.exclusions import mark_excluded
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
        """The conversation's key: a DM, and a guild line that names no channel, are the user's own; a
        guild channel is shared by its users. The guild is part of every guild key: a DM and a guild
        never share a conversation (its guild is copied into every memory formed there), nor do two
        guilds whose transcripts reuse a channel id."""
        if self.is_dm:
            return f"dm:{self.user_id}"
        if self.channel_id is None:
            return f"g:{self.guild_id}:u:{self.user_id}"
        return f"ch:{self.guild_id}:{self.channel_id}"


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
class LoggedMessage:
    """One message of a conversation's log: what is stored, and what memory formation reads back.

    `reply_to` is, for a reply, the external id of the user message it answers (in the same
    conversation); None on a user message, and on a reply that leaves the choice to `store_messages`.
    `excluded`: never part of a memory, nor context of one (said incognito, or forgotten; read back
    from the log, see `messages.memory_excluded`).
    """

    external_id: str
    author_id: str
    author_name: str | None
    role: MessageRole
    content: str
    created_at: datetime
    token_count: int = 0
    reply_to: str | None = None
    excluded: bool = False

    @classmethod
    def of(cls, message: Message, reply_to: str | None = None) -> LoggedMessage:
        """A plain copy of a stored message; `reply_to` is the external id of the message it answers."""
        return cls(
            external_id=message.external_id,
            author_id=message.author_id,
            author_name=message.author_name,
            role=MessageRole(message.role),
            content=message.content,
            created_at=message.created_at,
            token_count=message.token_count,
            reply_to=reply_to,
            excluded=message.memory_excluded is not None,
        )


class MessageIdCollision(InvalidInputError):
    """A message came in under an id the conversation's log holds for another message."""

    def __init__(self, external_id: str, index: int, reason: str) -> None:
        super().__init__(f"message id {external_id!r} is already in the log, for another message ({reason})")
        self.external_id = external_id
        self.index = index  # the incoming message's place in what was being stored
        self.reason = reason


def storable_text(text: str) -> str:
    """The text as PostgreSQL can store it: NUL bytes removed, unpaired surrogates made U+FFFD.

    Both come in from transcripts (JSON escapes) and model output, and would otherwise fail the insert.
    """
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16, a surrogate pair written as two code points becomes its character again.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


async def store_messages(
    session: AsyncSession, conversation_id: int, messages: Sequence[LoggedMessage], *, exact: bool = False
) -> int:
    """Insert messages not yet in the log (by external id), oldest first; return how many were new.

    A message whose id is stored already must be that message: the same author and role, and with
    `exact` (ids that are only a file's, as an import's) the same text and, for a reply, the same
    message answered; else MessageIdCollision names it, and the caller's transaction must not commit.
    Without `exact` (Discord's ids, which name one message for good) the text may differ: an edit.

    Each new reply is linked to the user message it answers: the one its `reply_to` names, else the
    nearest user message before it (in `messages`, then in the stored log). A reply that answers no
    stored user message (none before it, or `reply_to` naming none) is stored unlinked.

    Every path that stores (chat, catch-up, import) comes here, so this is where exclusions are set, in
    the same transaction: a new user message said while its author was incognito with the
    conversation's personality (a span of theirs covers its time), and a new reply to an excluded
    message, are marked like it.
    """
    if not messages:
        return 0
    rows = [
        {
            "conversation_id": conversation_id,
            "external_id": m.external_id,
            "author_id": m.author_id,
            "author_name": storable_text(m.author_name) if m.author_name is not None else None,
            "role": m.role.value,
            "content": storable_text(m.content),
            "created_at": m.created_at,
            "token_count": m.token_count,
        }
        for m in messages
    ]
    # One statement, its rows as parameters (sent as multi-row VALUES by insertmanyvalues, in slices
    # under asyncpg's cap on parameters): built with `.values(rows)`, each batch was compiled anew.
    connection = await session.connection()
    inserted = await connection.execute(_insert_statement(), rows)
    new: dict[str, int] = {external_id: row_id for external_id, row_id in inserted}
    await _link_replies(session, conversation_id, messages, new)
    await _refuse_collisions(session, conversation_id, messages, new, exact=exact)
    roles = {m.external_id: m.role for m in messages}
    added = {role: [i for key, i in new.items() if roles[key] is role] for role in MessageRole}
    await mark_excluded(
        session, conversation_id, users=added[MessageRole.USER], replies=added[MessageRole.ASSISTANT]
    )
    return len(new)


@functools.cache
def _insert_statement() -> Any:  # an Insert, typed loosely as SQLAlchemy's generics are
    """`store_messages`'s statement, built once: new messages' (external id, row id); stored ones skipped."""
    return (
        insert(Message)
        .on_conflict_do_nothing(index_elements=["conversation_id", "external_id"])
        .returning(Message.external_id, Message.id)
    )


async def _refuse_collisions(
    session: AsyncSession,
    conversation_id: int,
    messages: Sequence[LoggedMessage],
    new: dict[str, int],
    *,
    exact: bool,
) -> None:
    """Raise MessageIdCollision for the first message that was not inserted (its id was stored, before
    or earlier in `messages`) and is not the stored message (see store_messages)."""
    inserted: set[str] = set()
    again: list[tuple[int, LoggedMessage]] = []
    for index, message in enumerate(messages):
        if message.external_id in new and message.external_id not in inserted:
            inserted.add(message.external_id)
        else:
            again.append((index, message))
    if not again:
        return
    answered = aliased(Message)
    stored: dict[str, tuple[str, str, str, str | None]] = {}
    names = sorted({m.external_id for _, m in again})
    for start in range(0, len(names), 5000):
        rows = await session.execute(
            select(
                Message.external_id, Message.author_id, Message.role, Message.content, answered.external_id
            )
            .outerjoin(answered, answered.id == Message.reply_to_id)
            .where(
                Message.conversation_id == conversation_id,
                Message.external_id.in_(names[start : start + 5000]),
            )
        )
        stored.update({row[0]: (row[1], row[2], row[3], row[4]) for row in rows})
    for index, message in again:
        author_id, role, content, answers = stored[message.external_id]
        if role != message.role.value:
            reason = f"a {'reply' if role == MessageRole.ASSISTANT.value else 'user message'} there"
        elif author_id != message.author_id:
            reason = "said by someone else"
        elif exact and content != storable_text(message.content):
            reason = "with other words"
        elif exact and None not in (answers, message.reply_to) and answers != message.reply_to:
            reason = f"answering {answers!r}"
        else:
            continue
        raise MessageIdCollision(message.external_id, index, reason)


async def _link_replies(
    session: AsyncSession, conversation_id: int, messages: Sequence[LoggedMessage], new: dict[str, int]
) -> None:
    """Set `reply_to_id` on the new replies (see store_messages)."""
    answers: dict[int, str | None] = {}  # new reply row id -> external id of the message it answers
    last_user: str | None = None
    for message in messages:
        if message.role is MessageRole.USER:
            last_user = message.external_id
        elif message.external_id in new:
            answers[new[message.external_id]] = message.reply_to or last_user
    if not answers:
        return
    # The messages answered are mostly among those just stored; the log is asked only for the others.
    user_ids = {
        m.external_id: new[m.external_id]
        for m in messages
        if m.role is MessageRole.USER and m.external_id in new
    }
    named = sorted({i for i in answers.values() if i is not None and i not in user_ids})
    for start in range(0, len(named), 5000):
        found = await session.execute(
            select(Message.external_id, Message.id).where(
                Message.conversation_id == conversation_id,
                Message.role == MessageRole.USER.value,
                Message.external_id.in_(named[start : start + 5000]),
            )
        )
        user_ids.update({external_id: row_id for external_id, row_id in found})
    links = []
    for reply_id, external_id in answers.items():
        if external_id is None:
            # No user message before it in this batch: the nearest one already in the log, if any.
            answered = await session.scalar(
                select(func.max(Message.id)).where(
                    Message.conversation_id == conversation_id,
                    Message.role == MessageRole.USER.value,
                    Message.id < reply_id,
                )
            )
        else:
            answered = user_ids.get(external_id)
        if answered is not None:
            links.append({"id": reply_id, "reply_to_id": answered})
    if links:
        # By primary key, row by row (one statement, executemany): a join with the batch would be
        # planned with the statistics of the log before this transaction, a scan of it as it grows.
        await session.execute(update(Message), links)


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


async def set_conversation_aside(session: AsyncSession, personality_id: int, venue: Venue) -> int | None:
    """Keep the conversation in this venue under a key of its own, so that the next message here opens a
    new one; its log, summary, memories and pending formation stay with it. Returns its id, or None
    when there is none here."""
    conversation = await find_conversation(session, personality_id, venue)
    if conversation is None:
        return None
    # Memory ids of exchanges already formed are stored; those formed later take the new key.
    conversation.venue_key = f"{venue.key}#{conversation.id}"
    return conversation.id


async def conversation_title(session: AsyncSession, personality_id: int, venue: Venue) -> str | None:
    """The title the rolling summary gave the conversation here, if any."""
    return await session.scalar(
        select(Conversation.title).where(
            Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
        )
    )
