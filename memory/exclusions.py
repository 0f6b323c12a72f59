"""What keeps a message of the log out of memory for good, set as it is stored: said while its author
was incognito (a span of theirs covered its time), or a reply to such a message
(`messages.memory_excluded`; memory.conversations.store_messages calls `mark_excluded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    SQLColumnExpression,
    and_,
    any_,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from models import Conversation, IncognitoSession, Message

# messages.memory_excluded of a message its author said while incognito.
INCOGNITO = "incognito"


def incognito_span_covers(at: SQLColumnExpression[datetime] | datetime) -> ColumnElement[bool]:
    """An `incognito_sessions` row whose span covers the time `at`: from its start to the earlier of
    its ends_at and ended_at (with neither, it is still on)."""
    end = func.least(IncognitoSession.ends_at, IncognitoSession.ended_at)  # NULLs are ignored
    return and_(IncognitoSession.started_at <= at, or_(end.is_(None), end > at))


async def mark_excluded(
    session: AsyncSession, conversation_id: int, *, users: Sequence[int], replies: Sequence[int]
) -> None:
    """Mark the new user messages (`users`, row ids) said incognito, then the new replies to any
    excluded message; one set-based UPDATE each, however many messages came in."""
    if users:
        personality = select(Conversation.personality_id).where(Conversation.id == conversation_id)
        await session.execute(
            update(Message)
            .where(
                Message.id == any_(literal(users, ARRAY(BigInteger))),
                Message.memory_excluded.is_(None),
                exists().where(
                    IncognitoSession.user_id == Message.author_id,
                    or_(
                        IncognitoSession.personality_id.is_(None),
                        IncognitoSession.personality_id == personality.scalar_subquery(),
                    ),
                    incognito_span_covers(Message.created_at),
                ),
            )
            .values(memory_excluded=INCOGNITO)
        )
    if replies:
        answered = aliased(Message)
        await session.execute(
            update(Message)
            .where(
                Message.id == any_(literal(replies, ARRAY(BigInteger))),
                Message.memory_excluded.is_(None),
                answered.id == Message.reply_to_id,
                answered.memory_excluded.is_not(None),
            )
            .values(memory_excluded=answered.memory_excluded)
        )
