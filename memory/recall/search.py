"""Recall: the user's memories of a personality that best match a query, in the venue asking.

The index finds candidates by meaning (dense) and by keyword (sparse) within the venue's filter; the
text then comes from Postgres, re-checking ownership, so a stale index entry can neither leak nor
revive a forgotten memory.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select

from memory.recall.keywords import encode_sparse_query
from memory.recall.store import MemoryStore
from memory.types import MemoryState, RecallFilter
from models import Memory, UserSettings


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    id: uuid.UUID
    score: float
    content: str
    content_verbatim: str | None
    source_message_ids: list[str]
    occurred_at: datetime
    summarized: bool
    summarizer: str


async def recall(
    store: MemoryStore,
    *,
    personality_id: int,
    user_id: str,
    query: str,
    guild_id: str | None = None,
    limit: int = 5,
) -> list[RecalledMemory]:
    """The user's memories of this personality that best match the query, for this venue only.

    The query is searched as given: callers pass user text with its chat-template tokens removed.
    """
    query = query.strip()
    if not query or limit <= 0:
        return []
    index = await store.ready()
    allow_dm = guild_id is not None and await _allows_dm_memories_in_guilds(store, user_id, personality_id)
    dense = (await store.embedder.embed([query]))[0]
    flt = RecallFilter(personality_id=personality_id, user_id=user_id, guild_id=guild_id, allow_dm=allow_dm)
    hits = await index.search(dense=dense, sparse=encode_sparse_query(query), flt=flt, limit=limit * 2)
    if not hits:
        return []
    scores = {hit.id: hit.score for hit in hits}
    async with store.sessionmaker() as session:
        rows = (
            await session.scalars(
                select(Memory).where(
                    Memory.id.in_(list(scores)),
                    Memory.state != MemoryState.DELETED.value,
                    Memory.personality_id == personality_id,
                    Memory.user_id == user_id,
                )
            )
        ).all()
    rows = sorted(rows, key=lambda m: (-scores[m.id], -m.occurred_at.timestamp()))[:limit]
    return [
        RecalledMemory(
            id=m.id,
            score=scores[m.id],
            content=m.content,
            content_verbatim=m.content_verbatim,
            source_message_ids=list(m.source_message_ids),
            occurred_at=m.occurred_at,
            summarized=m.summarized,
            summarizer=m.summarizer,
        )
        for m in rows
    ]


async def _allows_dm_memories_in_guilds(store: MemoryStore, user_id: str, personality_id: int) -> bool:
    """Whether the user let their DM memories (of this personality, or of all) be recalled in guilds."""
    async with store.sessionmaker() as session:
        return bool(
            await session.scalar(
                select(func.bool_or(UserSettings.allow_dm_recall_in_guilds)).where(
                    UserSettings.user_id == user_id,
                    or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality_id),
                )
            )
        )
