"""What formation has made: memories per mode and summarizer, the storage they saved, fidelity misses,
and what still waits (messages not yet remembered, memories not yet indexed).

Sizes are characters on both sides, as Postgres `length()` counts them: `source_chars` is the
verbatim exchange's length, the stored size the length of the text kept (summary and verbatim).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from memory.formation.forming import pending_message_count
from memory.recall.store import MemoryStore
from memory.types import MemoryState
from models import Memory


@dataclass(frozen=True, slots=True)
class ModeStats:
    mode: str
    summarizer: str
    memories: int
    source_chars: int
    stored_chars: int
    fidelity_misses: int

    @property
    def saving_percent(self) -> float:
        return _saving(self.source_chars, self.stored_chars)


@dataclass(frozen=True, slots=True)
class MemoryStats:
    rows: list[ModeStats]
    pending_messages: int
    unindexed_memories: int

    @property
    def memories(self) -> int:
        return sum(r.memories for r in self.rows)

    @property
    def source_chars(self) -> int:
        return sum(r.source_chars for r in self.rows)

    @property
    def stored_chars(self) -> int:
        return sum(r.stored_chars for r in self.rows)

    @property
    def saving_percent(self) -> float:
        return _saving(self.source_chars, self.stored_chars)


def _saving(source: int, stored: int) -> float:
    return 100.0 * (1 - stored / source) if source else 0.0


async def memory_stats(
    store: MemoryStore, *, personality_id: int | None = None, user_id: str | None = None
) -> MemoryStats:
    """Live memories of a personality (or all), of one user (or all), grouped by mode and summarizer."""
    stored = func.length(Memory.content) + func.coalesce(func.length(Memory.content_verbatim), 0)
    query = select(
        Memory.mode,
        Memory.summarizer,
        func.count(Memory.id),
        func.coalesce(func.sum(Memory.source_chars), 0),
        func.coalesce(func.sum(stored), 0),
        func.count(Memory.id).filter(func.jsonb_array_length(Memory.fidelity_misses) > 0),
    ).where(Memory.state != MemoryState.DELETED.value)
    if personality_id is not None:
        query = query.where(Memory.personality_id == personality_id)
    if user_id is not None:
        query = query.where(Memory.user_id == user_id)
    unindexed = select(func.count(Memory.id)).where(Memory.state == MemoryState.FORMED.value)
    if personality_id is not None:
        unindexed = unindexed.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        rows = (await session.execute(query.group_by(Memory.mode, Memory.summarizer))).all()
        unindexed_count = int(await session.scalar(unindexed) or 0)
    return MemoryStats(
        rows=[ModeStats(r[0], r[1], r[2], int(r[3]), int(r[4]), r[5]) for r in sorted(rows)],
        pending_messages=await pending_message_count(store, personality_id, user_id),
        unindexed_memories=unindexed_count,
    )
