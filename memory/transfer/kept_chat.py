"""A chat imported whole, as its user kept it (a SillyTavern chat): what the log holds of it that the
chat no longer does goes, with its exchanges' memories, before the chat is stored (issue 33).

A chat's messages carry no ids of their own: each is known by its content (memory.transfer.sillytavern
makes its id from the chat, its speaker, its date and its words) and its position (the user line a
reply answers, the chat it belongs to). So when the user kept another swipe of a reply, edited a line
of theirs, deleted one or regenerated the last reply, the chat read again holds lines of new ids, and
the log lines of the old ones: those are replaced, position by position:

- a stored message of this chat (its id names the chat) that the chat no longer holds: edited or
  deleted in SillyTavern;
- a stored reply to a user line of the chat that is not among the chat's replies to it: another swipe
  kept (the rule for chats imported before ids named their chat, too);
- a stored reply the chat holds, but answering another line now (the line before it was edited or
  deleted): stored again with the line it answers now;
- a stored reply to a message that goes, with it.

Every exchange these touch is forgotten (the rows deleted, not tombstoned: it is formed anew from what
the chat holds) and made pending again; nothing of the old text stays in the log or the memories, and
the caller drops the memories' points from the index once committed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import BigInteger, delete, func, literal, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.conversations import LoggedMessage
from memory.formation.forming import CLAIM_LOCK_SPACE
from memory.recall.store import forget_rows
from memory.types import MemoryState, MessageRole
from models import Conversation, Memory, Message

CHAT_ID_PREFIX = "st-"
# "st-<chat>-<line>[-n]": the chat (from its metadata) then the line's own digest. An id without the
# chat ("st-<line>[-n]") was made before ids named their chat, or for a chat without metadata.
_CHAT_LINE_ID = re.compile(r"(st-[0-9a-f]{10}-)([0-9a-f]{40}(?:-\d+)?)")


def chat_line_id(chat_key: str | None, line_digest: str) -> str:
    """A chat line's id: its chat's key (None: the chat has no metadata to make one from) and its own."""
    return f"{CHAT_ID_PREFIX}{chat_key}-{line_digest}" if chat_key else f"{CHAT_ID_PREFIX}{line_digest}"


def chat_of(external_id: str) -> str | None:
    """The prefix every id of the line's chat starts with; None for an id that names no chat."""
    match = _CHAT_LINE_ID.fullmatch(external_id)
    return match.group(1) if match else None


def id_without_chat(external_id: str) -> str | None:
    """The id the line had before ids named their chat (a chat imported then is still known by it)."""
    match = _CHAT_LINE_ID.fullmatch(external_id)
    return CHAT_ID_PREFIX + match.group(2) if match else None


async def ids_stored_without_chat(
    session: AsyncSession, personality_id: int, external_ids: Iterable[str]
) -> dict[str, str]:
    """For the chat's ids whose line the personality's log holds under its older id (without the
    chat), that id: the line keeps it, so a chat imported before is not imported twice."""
    older = {old: new for new in external_ids if (old := id_without_chat(new)) is not None}
    if not older:
        return {}
    stored = await session.scalars(
        select(Message.external_id)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Conversation.personality_id == personality_id, Message.external_id.in_(sorted(older)))
    )
    return {older[old]: old for old in stored}


async def venue_conversations(session: AsyncSession, venues: Iterable[tuple[int, str]]) -> list[int]:
    """The conversations of these (personality, venue key) pairs: the current one and those set aside."""
    pairs = sorted(set(venues))
    if not pairs:
        return []
    venue = func.split_part(Conversation.venue_key, "#", 1)
    found = await session.scalars(
        select(Conversation.id).where(tuple_(Conversation.personality_id, venue).in_(pairs))
    )
    return sorted(found)


@dataclass(frozen=True, slots=True)
class _Stored:
    row_id: int
    external_id: str
    role: str
    answered_row: int | None
    answered: str | None  # the external id of the message it answers


async def replace_changed(
    session: AsyncSession, conversation_ids: Sequence[int], messages: Sequence[LoggedMessage]
) -> list[uuid.UUID]:
    """Delete what the conversations hold of the chat (its `messages`, all of it) that it no longer
    does, forget those exchanges' memories and make them pending again, under the conversations'
    formation claims (see the module docstring); the ids of the memories forgotten, for the index."""
    if not conversation_ids or not messages:
        return []
    chat = {m.external_id: m for m in messages}
    chats = {prefix for m in messages if (prefix := chat_of(m.external_id)) is not None}
    replies: dict[str, set[str]] = {}  # a user line's id -> the ids of the chat's replies to it
    for m in messages:
        if m.role is MessageRole.ASSISTANT and m.reply_to is not None:
            replies.setdefault(m.reply_to, set()).add(m.external_id)
    stored = await _stored_chat_messages(session, conversation_ids)
    gone: dict[int, _Stored] = {}
    for row in stored:
        held = chat.get(row.external_id)
        if held is None:
            if chat_of(row.external_id) in chats:
                gone[row.row_id] = row  # edited or deleted
            elif row.role == MessageRole.ASSISTANT.value and row.answered in replies:
                gone[row.row_id] = row  # another swipe kept
        elif row.role == MessageRole.ASSISTANT.value and held.reply_to != row.answered:
            gone[row.row_id] = row  # the line it answered was edited or deleted: stored again
    for row in stored:  # a reply to what goes, with it
        if row.answered_row in gone:
            gone[row.row_id] = row
    if not gone:
        return []
    involved: set[str] = set()
    for row in gone.values():
        involved.add(row.external_id)
        for answered in (row.answered, held.reply_to if (held := chat.get(row.external_id)) else None):
            if answered is not None:
                involved.add(answered)
    # Wait for a pass forming these exchanges, and keep any other out until this is committed.
    for conversation_id in sorted(conversation_ids):
        await session.execute(
            select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + conversation_id, BigInteger)))
        )
    of_exchanges = (
        Memory.conversation_id.in_(conversation_ids),
        Memory.source_message_ids.overlap(sorted(involved)),
    )
    sources = (
        await session.scalars(
            select(func.unnest(Memory.source_message_ids)).where(
                *of_exchanges, Memory.state != MemoryState.DELETED.value
            )
        )
    ).all()
    forgotten = await forget_rows(session, *of_exchanges, tombstone=False)
    await session.execute(delete(Message).where(Message.id.in_(sorted(gone))))
    await session.execute(
        update(Message)
        .where(
            Message.conversation_id.in_(conversation_ids),
            Message.external_id.in_(sorted(set(sources) | involved)),
            Message.memory_excluded.is_(None),
        )
        .values(memory_processed_at=None)
    )
    return forgotten


async def _stored_chat_messages(session: AsyncSession, conversation_ids: Sequence[int]) -> list[_Stored]:
    """The messages of chats the conversations hold (ids made by memory.transfer.sillytavern)."""
    answered = aliased(Message)
    rows = await session.execute(
        select(Message.id, Message.external_id, Message.role, Message.reply_to_id, answered.external_id)
        .outerjoin(answered, Message.reply_to_id == answered.id)
        .where(
            Message.conversation_id.in_(conversation_ids),
            Message.external_id.startswith(CHAT_ID_PREFIX, autoescape=True),
        )
    )
    return [_Stored(*row) for row in rows]
