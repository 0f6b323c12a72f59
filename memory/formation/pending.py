"""The exchanges of one conversation that are ready to become memories, read from the message log.

Replies drive the work: an exchange is complete once a reply to its message is stored, so a batch
starts from the oldest replies not yet remembered and reads what their exchanges need, each with an
indexed query however long the log is: the messages they answer, all their parts, the earlier
messages of the same users that got no reply, and a few messages of context before each. Messages
of users still waiting for a reply are not read at all; they stay pending until theirs exists.
Excluded messages (said incognito, or forgotten) are read to be marked done, never as context.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import BigInteger, and_, any_, exists, func, literal, or_, select, true, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import ColumnElement

from memory.conversations import LoggedMessage
from memory.formation.exchanges import CONTEXT_MESSAGES, Grouping, group_exchanges
from memory.formation.repeats import FORGOTTEN
from memory.types import MessageRole
from models import Conversation, Message

USER = MessageRole.USER.value
REPLY = MessageRole.ASSISTANT.value
# Replies read per answered message a batch takes: a reply sent in several parts is a row per part.
PARTS_PER_REPLY = 4


class AwaitedReplies:
    """User messages whose reply this process is writing (by external id): another answered message of
    their author must not take them in, their own reply is coming. Built once by the composition root
    and shared by the chat service (which holds a message for its whole turn, from before it is stored
    until its reply is recorded or has failed) and formation (which reads `current`). A hold is released
    on every path out of its `with` block, so nothing is ever left held: no lapse is needed."""

    def __init__(self) -> None:
        self._held: Counter[str] = Counter()

    @contextmanager
    def holding(self, external_ids: Iterable[str]) -> Iterator[None]:
        """Hold these messages for the block; a message held twice (a turn inside a catch-up that
        stored it) stays held until both are done."""
        held = list(external_ids)
        self._held.update(held)
        try:
            yield
        finally:
            self._held.subtract(held)
            for external_id in held:
                if self._held[external_id] <= 0:
                    del self._held[external_id]

    def current(self) -> set[str]:
        return set(self._held)


async def read_ready(
    session: AsyncSession,
    conversation_id: int,
    *,
    limit: int,
    awaited: Collection[str] = (),
    in_flight: Collection[str] = (),
) -> Grouping | None:
    """The exchanges of up to `limit` answered messages (oldest reply first) and the orphan replies
    among them; None when no reply of the conversation waits to be remembered. Messages in `awaited`
    (their reply is being written) are never taken into another message's exchange. Messages in
    `in_flight` (batches of this pass being formed, not yet marked) count as remembered already."""
    in_conversation = Message.conversation_id == conversation_id
    pending = _pending(in_flight)
    # The oldest pending replies, read in order from the pending index as far as the batch needs, then
    # grouped: grouping every pending reply would read the whole backlog for each batch, and a large
    # import's formation would slow down as it goes.
    oldest = (
        select(Message.id, Message.reply_to_id)
        .where(in_conversation, pending, Message.role == REPLY)
        .order_by(Message.id)
        .limit(limit * PARTS_PER_REPLY)
        .subquery()
    )
    answered = list(
        (
            await session.scalars(
                select(oldest.c.reply_to_id)
                .group_by(oldest.c.reply_to_id)
                .order_by(func.min(oldest.c.id))
                .limit(limit)
            )
        ).all()
    )
    if not answered:
        return None
    target_ids = [i for i in answered if i is not None]
    answering: ColumnElement[bool] = Message.reply_to_id.in_(target_ids)
    if len(target_ids) < len(answered):  # replies that answer nothing: orphans, read to be marked
        answering = or_(answering, Message.reply_to_id.is_(None))
    replies = await _rows(session, in_conversation, pending, Message.role == REPLY, answering)
    targets = await _rows(session, Message.id.in_(target_ids)) if target_ids else []
    unanswered = [
        m
        for m in await _unanswered_before(session, pending, conversation_id, targets)
        if m.external_id not in awaited
    ]
    open_targets = (m for m in targets if m.memory_processed_at is None and m.external_id not in in_flight)
    formable = [*replies, *open_targets, *unanswered]
    context = await _context_before(session, conversation_id, [m.id for m in formable])
    rows = {m.id: m for m in [*formable, *targets, *context]}
    external = {row_id: m.external_id for row_id, m in rows.items()}
    log = [
        LoggedMessage.of(m, external.get(m.reply_to_id) if m.reply_to_id is not None else None)
        for _, m in sorted(rows.items())
    ]
    return group_exchanges(log, formable={m.external_id for m in formable})


async def mark_remembered(session: AsyncSession, conversation_id: int, external_ids: Collection[str]) -> None:
    """Mark these messages done: their exchange became a memory, was skipped by settings, or is none."""
    names = sorted(set(external_ids))
    for start in range(0, len(names), 5000):
        await session.execute(
            update(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.external_id.in_(names[start : start + 5000]),
                Message.memory_processed_at.is_(None),
            )
            .values(memory_processed_at=func.now())
        )


async def cancel_pending(session: AsyncSession, *, user_id: str, personality_id: int | None) -> int:
    """Mark the user's messages not yet remembered (pending, or held back by an outage and retried) as
    forgotten, of one personality or all: `forget all` forgets what was said, formed or not (issue 33).
    The replies to them form nothing either (`read_ready` passes over replies to excluded lines)."""
    where = [
        Message.author_id == user_id,
        Message.memory_processed_at.is_(None),
        Message.memory_excluded.is_(None),
    ]
    if personality_id is not None:
        owned = select(Conversation.id).where(Conversation.personality_id == personality_id)
        where.append(Message.conversation_id.in_(owned))
    result = await session.execute(update(Message).where(*where).values(memory_excluded=FORGOTTEN))
    return int(getattr(result, "rowcount", 0) or 0)


def _pending(in_flight: Collection[str]) -> ColumnElement[bool]:
    """Not remembered yet, nor in a batch being formed."""
    pending = Message.memory_processed_at.is_(None)
    return and_(pending, Message.external_id.not_in(sorted(in_flight))) if in_flight else pending


async def _rows(session: AsyncSession, *where: ColumnElement[bool]) -> list[Message]:
    return list((await session.scalars(select(Message).where(*where))).all())


async def _unanswered_before(
    session: AsyncSession, pending: ColumnElement[bool], conversation_id: int, targets: list[Message]
) -> list[Message]:
    """The pending messages of the targets' authors, before their latest target, with no reply (yet).

    PostgreSQL cannot know that the pending messages before a batch are few (those before them were
    remembered): planned as one query with NOT EXISTS, or with no lower bound on the ids, it scanned
    the whole log for every batch. So the range starts at the conversation's oldest pending message
    (a constant it can plan with), and the replies are checked by their index after.
    """
    if not targets:
        return []
    in_conversation = Message.conversation_id == conversation_id
    oldest = await session.scalar(select(func.min(Message.id)).where(in_conversation, pending))
    if oldest is None:
        return []
    before = await _rows(
        session,
        in_conversation,
        pending,
        Message.role == USER,
        Message.author_id.in_({m.author_id for m in targets}),
        Message.id >= oldest,
        Message.id < max(m.id for m in targets),
    )
    if not before:
        return []
    answered = set(
        (
            await session.scalars(
                select(Message.reply_to_id).where(
                    Message.reply_to_id == any_(literal([m.id for m in before], ARRAY(BigInteger)))
                )
            )
        ).all()
    )
    return [m for m in before if m.id not in answered]


async def _context_before(
    session: AsyncSession, conversation_id: int, anchor_ids: list[int]
) -> list[Message]:
    """The CONTEXT_MESSAGES messages before each anchor, in one query (a lateral join); excluded
    messages and the replies to them are no one's context."""
    if not anchor_ids:
        return []
    anchors = select(func.unnest(literal(anchor_ids, ARRAY(BigInteger))).label("anchor_id")).subquery()
    answered = aliased(Message)
    before = (
        select(Message.id)
        .where(
            Message.conversation_id == conversation_id,
            Message.id < anchors.c.anchor_id,
            Message.memory_excluded.is_(None),
            ~exists().where(answered.id == Message.reply_to_id, answered.memory_excluded.is_not(None)),
        )
        .order_by(Message.id.desc())
        .limit(CONTEXT_MESSAGES)
        .lateral()
    )
    ids = select(before.c.id).select_from(anchors.join(before, true()))
    return await _rows(session, Message.id.in_(ids))
