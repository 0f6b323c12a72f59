"""The exchanges just before and after recall's best memories in their conversations, and which of
them come with the hits as context (`with_context`) within the answer's word budget."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import DateTime, Integer, Select, String, and_, any_, bindparam, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.recall.recalled import ID_ARRAY, STORED_COLUMNS, StoredMemory
from memory.types import MemoryState
from models import Memory, Message

Around = tuple[
    StoredMemory | None, StoredMemory | None
]  # the memories just before and after one, in its conversation


def with_context(
    hits: Sequence[StoredMemory], around: Mapping[uuid.UUID, Around], *, budget: int
) -> list[tuple[StoredMemory, Around]]:
    """Each hit with the neighbours that come with it: those of the hits in `around`, best hit first,
    each neighbour once, never one recalled as a hit itself, and only while the words of the whole
    answer (hits and context) stay within `budget`. The hits themselves are never cut.
    """
    words = sum(_words(m) for m in hits)
    taken = {m.id for m in hits}
    out: list[tuple[StoredMemory, Around]] = []
    for hit in hits:
        kept: list[StoredMemory | None] = []
        for neighbour in around.get(hit.id, (None, None)):
            if neighbour is None or neighbour.id in taken or words + _words(neighbour) > budget:
                kept.append(None)
                continue
            taken.add(neighbour.id)
            words += _words(neighbour)
            kept.append(neighbour)
        out.append((hit, (kept[0], kept[1])))
    return out


def _words(memory: StoredMemory) -> int:
    return len(memory.content.split())


async def read_neighbours(
    session: AsyncSession, personality_id: int, user_id: str, memories: Sequence[StoredMemory]
) -> dict[uuid.UUID, Around]:
    """The memories of this user just before and after each of these in its conversation (not
    forgotten), in one query; a memory of no conversation has none.

    Conversation order is the log order of each memory's first message. Only memories at the
    nearest earlier time, the same time, or the nearest later time of each are read: an imported
    transcript may give a whole session one timestamp.
    """
    placed = [m for m in memories if m.conversation_id is not None]
    if not placed:
        return {}
    values: dict[str, Any] = {
        "personality_id": personality_id,
        "user_id": user_id,
        "ids": sorted(m.id for m in placed),
    }
    for n, memory in enumerate(placed):
        values[f"conversation_{n}"], values[f"at_{n}"] = memory.conversation_id, memory.occurred_at
    rows = await session.execute(_neighbours_of(len(placed)), values)
    around: dict[uuid.UUID, list[StoredMemory | None]] = {m.id: [None, None] for m in placed}
    for row in rows:
        memory_id, is_before, *fields = row
        around[memory_id][0 if is_before else 1] = StoredMemory(*fields)
    return {memory_id: (before, after) for memory_id, (before, after) in around.items()}


@functools.cache
def _neighbours_of(count: int) -> Select[Any]:
    """`read_neighbours`'s query for `count` memories, built once: its values are parameters (the
    owner, the memories' `ids`, and each one's `conversation_<n>` and `at_<n>`). Built anew it cost
    several ms of each recall's event loop."""
    owner = (
        Memory.personality_id == bindparam("personality_id", type_=Integer),
        Memory.user_id == bindparam("user_id", type_=String),
        Memory.state != MemoryState.DELETED.value,
        Memory.forgotten_claim_id.is_(None),
    )
    windows, lows, highs = [], [], []
    for n in range(count):
        conversation = bindparam(f"conversation_{n}", type_=Integer)
        at = bindparam(f"at_{n}", type_=DateTime(timezone=True))
        same = (*owner, Memory.conversation_id == conversation)
        # The nearest times before and after, each the first entry of the owner-thread index that way.
        earlier = (
            select(Memory.occurred_at)
            .where(*same, Memory.occurred_at < at)
            .order_by(Memory.occurred_at.desc())
            .limit(1)
            .scalar_subquery()
        )
        later = (
            select(Memory.occurred_at)
            .where(*same, Memory.occurred_at > at)
            .order_by(Memory.occurred_at)
            .limit(1)
            .scalar_subquery()
        )
        lows.append(func.coalesce(earlier, at))
        highs.append(func.coalesce(later, at))
        windows.append(
            and_(Memory.conversation_id == conversation, Memory.occurred_at.between(lows[-1], highs[-1]))
        )
    # Conversation order within the windows (close memories' windows overlap: the merged order is
    # still the conversation's), and each memory's neighbours in it: only theirs are read whole.
    thread, order = Memory.conversation_id, (Memory.occurred_at, Message.id)
    line = (
        select(
            Memory.id,
            func.lag(Memory.id).over(partition_by=thread, order_by=order).label("before"),
            func.lead(Memory.id).over(partition_by=thread, order_by=order).label("after"),
        )
        .join(
            Message,
            (Message.conversation_id == Memory.conversation_id)
            & (Message.external_id == Memory.source_message_ids[1]),
        )
        # The span of all windows, for the index to read only that range; then each window.
        .where(*owner, Memory.occurred_at.between(func.least(*lows), func.greatest(*highs)), or_(*windows))
        .subquery("line")
    )
    return (
        select(line.c.id.label("of"), (line.c.before == Memory.id).label("is_before"), *STORED_COLUMNS)
        .join(Memory, or_(Memory.id == line.c.before, Memory.id == line.c.after))
        .where(line.c.id == any_(bindparam("ids", type_=ID_ARRAY)))
    )
