"""Which long-term memories went into a reply's prompt, stored with the reply: its receipt.

The chat turn records them right after the reply is stored (`record_reply_memories`), keyed by the
message the reply answers, so a regenerated reply's memories replace the old answer's and every part
of a long reply shows the same. The receipt is read back for a reply (any of its parts) or for the
message it answers (`reply_receipt`), by the user who was answered only: what the model saw, not a
new search. Each memory comes with its date, its own words (never its context's), why it was
chosen (pinned, its rank, or said around a recalled one) and whether it is pinned now; a memory
forgotten since is left out, and counted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.errors import NotFoundError, PermissionDeniedError
from memory.recall.search import RecalledMemory
from memory.recall.store import MemoryStore
from memory.recall.superseded import Superseded, superseded
from memory.types import MemoryState, MessageRole
from models import ForgottenClaim, Memory, Message, ReplyMemory

NOT_LOGGED = "I have no record of that message, so no memories to show for it."
NOT_YOURS = "Only the person this reply answered can see the memories it used."


class Reason(enum.StrEnum):
    """Why a memory went into a reply."""

    PINNED = "pinned"  # pinned by its user, and about the message
    RANK = "rank"  # among the best matches of the message
    CONTEXT = "context"  # said just around a recalled memory, and recalled with it


@dataclass(frozen=True, slots=True)
class UsedMemory:
    """A memory as a receipt shows it."""

    id: uuid.UUID
    occurred_at: datetime
    content: str
    reason: Reason
    rank: int  # the recalled memory's rank (a context memory: that of the one it came with)
    pinned: bool  # now
    superseded: Superseded | None = None  # since the reply (memory.recall.superseded)


@dataclass(frozen=True, slots=True)
class ReplyReceipt:
    """The memories a reply used, in the order its prompt had them; `forgotten` of them are gone."""

    conversation_id: int
    answered_message_id: str
    memories: list[UsedMemory]
    forgotten: int


def memories_seen(memories: Sequence[RecalledMemory]) -> dict[uuid.UUID, tuple[int, Reason]]:
    """Every memory a prompt holds with these recalled ones (they and the context they brought), in
    order, with its rank and why it is there."""
    used: dict[uuid.UUID, tuple[int, Reason]] = {}
    for rank, memory in enumerate(memories, start=1):
        used.setdefault(memory.id, (rank, Reason.PINNED if memory.pinned_first else Reason.RANK))
        for around in memory.context:
            used.setdefault(around.id, (rank, Reason.CONTEXT))
    return used


async def record_reply_memories(
    store: MemoryStore, *, conversation_id: int, message_id: str, memories: Sequence[RecalledMemory]
) -> int:
    """Record the memories that went into the reply to this message (its external id in the
    conversation), replacing any recorded for it before; how many. Only memories of the user the
    message is from are kept, whatever is passed."""
    used = memories_seen(memories)
    async with store.sessionmaker.begin() as session:
        answered = await session.scalar(
            select(Message).where(
                Message.conversation_id == conversation_id,
                Message.external_id == message_id,
                Message.role == MessageRole.USER.value,
            )
        )
        if answered is None:
            raise NotFoundError(NOT_LOGGED)
        await session.execute(delete(ReplyMemory).where(ReplyMemory.answered_message_id == answered.id))
        owned = set(
            (
                await session.scalars(
                    select(Memory.id).where(Memory.id.in_(list(used)), Memory.user_id == answered.author_id)
                )
            ).all()
        )
        rows = [
            {"answered_message_id": answered.id, "memory_id": i, "rank": rank, "reason": reason.value}
            for i, (rank, reason) in used.items()
            if i in owned
        ]
        if rows:
            await session.execute(insert(ReplyMemory), rows)
        return len(rows)


async def reply_receipt(
    store: MemoryStore, *, user_id: str, message_id: str, conversation_id: int | None = None
) -> ReplyReceipt:
    """The memories the reply used: `message_id` is the reply's (any part) or the message it answers,
    in `conversation_id` when given. NotFoundError for a message never logged (or a reply answering
    none), PermissionDeniedError when `user_id` is not the user who was answered."""
    async with store.sessionmaker() as session:
        answered = await _answered(session, message_id, conversation_id)
        if not answered:
            raise NotFoundError(NOT_LOGGED)
        mine = [m for m in answered if m.author_id == user_id]
        if not mine:
            raise PermissionDeniedError(NOT_YOURS)
        # A message logged in several conversations (two personalities answered it): the one whose
        # reply used memories, else the first.
        recorded = (
            await session.execute(
                select(ReplyMemory, Memory, ForgottenClaim.corrected_text)
                .join(Memory, Memory.id == ReplyMemory.memory_id)
                .outerjoin(ForgottenClaim, ForgottenClaim.id == Memory.forgotten_claim_id)
                .where(
                    ReplyMemory.answered_message_id.in_([m.id for m in mine]),
                    Memory.user_id == user_id,
                )
                .order_by(ReplyMemory.answered_message_id, ReplyMemory.rank, ReplyMemory.reason == "context")
            )
        ).all()
    chosen = next((m for m in mine if any(r.answered_message_id == m.id for r, _, _ in recorded)), mine[0])
    used = [(r, memory, fix) for r, memory, fix in recorded if r.answered_message_id == chosen.id]
    live = [(r, memory, fix) for r, memory, fix in used if memory.state != MemoryState.DELETED.value]
    return ReplyReceipt(
        conversation_id=chosen.conversation_id,
        answered_message_id=chosen.external_id,
        memories=[
            UsedMemory(
                memory.id,
                memory.occurred_at,
                memory.content,
                Reason(r.reason),
                r.rank,
                memory.pinned,
                superseded(memory, fix),
            )
            for r, memory, fix in live
        ],
        forgotten=len(used) - len(live),
    )


async def _answered(session: AsyncSession, message_id: str, conversation_id: int | None) -> list[Message]:
    """The user messages answered by the reply with this external id, or this user message itself."""
    found = select(Message).where(Message.external_id == message_id)
    if conversation_id is not None:
        found = found.where(Message.conversation_id == conversation_id)
    answered: dict[int, Message] = {}
    for message in (await session.scalars(found.order_by(Message.conversation_id))).all():
        if message.role == MessageRole.USER.value:
            answered[message.id] = message
        elif message.reply_to_id is not None:
            user_message = await session.get(Message, message.reply_to_id)
            if user_message is not None:
                answered[user_message.id] = user_message
    return list(answered.values())
