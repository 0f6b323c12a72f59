"""A user's own memories as they browse them: a page of the newest, or given memories in a given
order (the best matches of a search), each with its personality and whether it is pinned or edited.

Only the user's own live memories are ever read: every query is filtered by their id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, func, select

from memory.recall.store import MemoryStore
from memory.recall.superseded import Superseded, superseded
from memory.types import MemoryState
from models import ForgottenClaim, Memory, Personality


@dataclass(frozen=True, slots=True)
class BrowsedMemory:
    id: uuid.UUID
    personality_name: str
    occurred_at: datetime
    content: str
    pinned: bool
    edited: bool
    superseded: Superseded | None = None  # kept, never recalled (memory.recall.superseded)


@dataclass(frozen=True, slots=True)
class MemoryPage:
    memories: list[BrowsedMemory]
    total: int  # the user's memories in the whole listing, not only on this page


def _listing(user_id: str) -> Select[Memory, str, str | None]:
    return (
        select(Memory, Personality.display_name, ForgottenClaim.corrected_text)
        .join(Personality, Personality.id == Memory.personality_id)
        .outerjoin(ForgottenClaim, ForgottenClaim.id == Memory.forgotten_claim_id)
        .where(Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value)
    )


def _browsed(memory: Memory, personality_name: str, correction: str | None) -> BrowsedMemory:
    return BrowsedMemory(
        id=memory.id,
        personality_name=personality_name,
        occurred_at=memory.occurred_at,
        content=memory.content,
        pinned=memory.pinned,
        edited=memory.edited_at is not None,
        superseded=superseded(memory, correction),
    )


async def newest_page(
    store: MemoryStore, *, user_id: str, personality_id: int | None = None, offset: int = 0, limit: int = 5
) -> MemoryPage:
    """The user's memories (of one personality, or all), newest first, `limit` from `offset`."""
    listing = _listing(user_id)
    count = select(func.count(Memory.id)).where(
        Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value
    )
    if personality_id is not None:
        listing = listing.where(Memory.personality_id == personality_id)
        count = count.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        total = int(await session.scalar(count) or 0)
        rows = (
            await session.execute(
                listing.order_by(Memory.occurred_at.desc(), Memory.id.desc()).offset(offset).limit(limit)
            )
        ).all()
    return MemoryPage([_browsed(*row) for row in rows], total)


async def memories_by_id(
    store: MemoryStore, *, user_id: str, ids: Sequence[uuid.UUID]
) -> list[BrowsedMemory]:
    """These memories of the user, in the order given; those forgotten meanwhile (or not theirs) left out."""
    if not ids:
        return []
    async with store.sessionmaker() as session:
        rows = (await session.execute(_listing(user_id).where(Memory.id.in_(list(ids))))).all()
    found = {row[0].id: _browsed(*row) for row in rows}
    return [found[i] for i in ids if i in found]


async def personalities_remembered(store: MemoryStore, *, user_id: str) -> list[int]:
    """The personalities the user has live memories with."""
    async with store.sessionmaker() as session:
        return list(
            (
                await session.scalars(
                    select(Memory.personality_id)
                    .where(Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value)
                    .distinct()
                    .order_by(Memory.personality_id)
                )
            ).all()
        )
