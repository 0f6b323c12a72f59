"""The keyword side of a memory's point, read from the message log: the exchange as it was said, after
its date and the line said just before it in this user's thread (memory.recall.store keys every point it
writes from here, so formation, re-summarizing and reindexing key a memory alike)."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, any_, func, literal, or_, select, true, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.sql.expression import bindparam

from memory.recall.keywords import encode_keywords, keyword_text
from memory.types import SparseVector
from models import Memory, Message


@functools.cache
def _logged_keyword_query() -> Any:  # a CompoundSelect, typed loosely as SQLAlchemy's generics are
    """`logged_keyword_texts`'s query, built once (~6 ms of the event loop per call): ids a parameter."""
    sources = (
        select(
            Memory.id.label("memory_id"),
            Memory.conversation_id,
            Memory.user_id,
            Memory.occurred_at,
            Message.id.label("message_id"),
            Message.content,
            (Message.author_id == Memory.user_id).label("is_own"),
        )
        .join(
            Message,
            and_(
                Message.conversation_id == Memory.conversation_id,
                Message.external_id == any_(Memory.source_message_ids),
            ),
        )
        .where(Memory.id.in_(bindparam("ids", expanding=True)), Memory.edited_at.is_(None))
        .cte("sources")
    )
    firsts = (
        select(
            sources.c.memory_id,
            sources.c.conversation_id,
            sources.c.user_id,
            func.min(sources.c.message_id).label("first_id"),
        )
        .group_by(sources.c.memory_id, sources.c.conversation_id, sources.c.user_id)
        .cte("firsts")
    )
    before = aliased(Message)
    answered = aliased(Message)
    # The previous line of this user's own thread: their message, or a reply to one of theirs. In a
    # shared channel the line just before may be another user's, whose words must not make this
    # user's memory findable.
    previous = (
        select(before.id, before.content)
        .where(
            before.conversation_id == firsts.c.conversation_id,
            before.id < firsts.c.first_id,
            # Words said incognito or forgotten key no memory.
            before.memory_excluded.is_(None),
            or_(
                before.author_id == firsts.c.user_id,
                # The author of the message it answers, read by its primary key for each line looked at:
                # as EXISTS, PostgreSQL hashed every message of the user, a scan of the log per memory.
                select(answered.author_id).where(answered.id == before.reply_to_id).scalar_subquery()
                == firsts.c.user_id,
            ),
        )
        .order_by(before.id.desc())
        .limit(1)
        .lateral("previous")
    )
    return union_all(
        select(
            sources.c.memory_id,
            sources.c.occurred_at,
            sources.c.message_id,
            sources.c.content,
            sources.c.is_own,
            literal(False).label("is_previous"),
        ),
        select(
            firsts.c.memory_id,
            literal(None).label("occurred_at"),
            previous.c.id,
            previous.c.content,
            literal(False).label("is_own"),
            literal(True).label("is_previous"),
        ).select_from(firsts.join(previous, true())),
    ).order_by("memory_id", "message_id")


@dataclasses.dataclass(frozen=True, slots=True)
class KeywordTexts:
    """What a memory is keyed by on the keyword side: its keyword text (memory.recall.keywords
    `keyword_text`) and, apart, the lines its user said themselves."""

    text: str
    own_lines: str

    def encode(self) -> SparseVector:
        return encode_keywords(self.text, self.own_lines)


async def logged_keyword_texts(
    session: AsyncSession, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, KeywordTexts]:
    """The keyword texts of each memory whose exchange is still in the message log, in one query.

    It is the exchange as it was said, whatever the memory's mode (summarizing must not cost recall),
    after its date and the line said just before it in this user's thread of the conversation (their
    message or a reply to them: never another user's words; memory.recall.keywords), and the user's
    own lines of the exchange apart.
    Formation, re-summarizing and reindexing all key memories here, so a rebuilt index is the same.
    A memory its user corrected is left out: its own text keys it (`memory_point`).
    """
    rows = (await session.execute(_logged_keyword_query(), {"ids": list(ids)})).all()
    exchanges: dict[uuid.UUID, list[str]] = {}
    own: dict[uuid.UUID, list[str]] = {}
    previous_text: dict[uuid.UUID, str] = {}
    dates: dict[uuid.UUID, datetime] = {}
    for memory_id, occurred_at, _, content, is_own, is_previous in rows:
        if is_previous:
            previous_text[memory_id] = content
        else:
            exchanges.setdefault(memory_id, []).append(content)
            if is_own:
                own.setdefault(memory_id, []).append(content)
            dates[memory_id] = occurred_at
    return {
        memory_id: KeywordTexts(
            keyword_text(
                "\n".join(lines), previous=previous_text.get(memory_id), occurred_at=dates[memory_id]
            ),
            "\n".join(own.get(memory_id, ())),
        )
        for memory_id, lines in exchanges.items()
    }
