"""Recall: the user's memories of a personality that best match a query, in the venue asking.

The index finds candidates by meaning (dense) and by keyword (sparse) within the venue's filter; the
two lists are fused here, whatever the backend; the text then comes from Postgres, re-checking
ownership, so a stale index entry can neither leak nor revive a forgotten memory. The exchanges
just before and after the best memory follow it: what was said around an answer often completes it.
Memories their user pinned come first, when the query is about them (PIN_MIN_SIMILARITY).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.recall.index import Candidates
from memory.recall.keywords import encode_sparse_query
from memory.recall.store import MemoryStore
from memory.types import MemoryState, RecallFilter
from models import Memory, Message, UserSettings

# Candidates asked of each side. Measured flat from 20 to 100 on long conversations: a memory found
# low on one side and high on the other is still in both lists.
CANDIDATES = 60
# The dense side's share of a fused score, the keyword side's the rest. With a small local embedder
# the keyword side is the stronger one (with the analyzer and the date and previous-line keying);
# 0.2 to 0.4 measured alike, equal weights clearly worse.
DENSE_WEIGHT = 0.3
# A memory only the dense side found, at a cosine this low, is noise rather than a memory of what was
# asked: a question about something never said to the personality returns nothing, not the user's
# least unrelated memory. Unrelated texts score about 0 to 0.1 with the local MiniLM, related ones
# 0.3 and up; a memory with a keyword in common is kept whatever its cosine.
MIN_DENSE_SIMILARITY = 0.1
# A pinned memory is recalled ahead of the others when the query is about it: it shares a word with
# the query, or its meaning is this close (related texts score 0.2 and up against a short query with
# the local MiniLM, unrelated ones about 0). A pin the query is not about keeps its rank, or stays away.
PIN_MIN_SIMILARITY = 0.25


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
    pinned: bool = False


def fuse(candidates: Candidates, *, dense_weight: float = DENSE_WEIGHT) -> dict[uuid.UUID, float]:
    """Each side's scores min-max normalised to [0, 1], then weighted and summed (absent = 0).

    A blend of scores rather than of ranks: the weaker side cannot lift its long tail over what the
    stronger side found clearly, and a memory both sides found scores highest. In [0, 1].
    """
    fused: dict[uuid.UUID, float] = {}
    for hits, weight in ((candidates.dense, dense_weight), (candidates.keyword, 1.0 - dense_weight)):
        if not hits:
            continue
        low, high = min(h.score for h in hits), max(h.score for h in hits)
        for hit in hits:
            normalised = 1.0 if high <= low else (hit.score - low) / (high - low)
            fused[hit.id] = fused.get(hit.id, 0.0) + weight * normalised
    return fused


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

    Best first by fused score (`fuse`), the most recent first among equals, except that the memories
    just before and after the best one in its conversation come right after it, and that relevant
    pinned memories come before all of them (`pins_first`). The query is searched as given: callers
    pass user text with its chat-template tokens removed.
    """
    query = query.strip()
    if not query or limit <= 0:
        return []
    index = await store.ready()
    allow_dm = guild_id is not None and await _allows_dm_memories_in_guilds(store, user_id, personality_id)
    dense = (await store.embedder.embed([query]))[0]
    flt = RecallFilter(personality_id=personality_id, user_id=user_id, guild_id=guild_id, allow_dm=allow_dm)
    found = await index.search(
        dense=dense, sparse=encode_sparse_query(query), flt=flt, limit=max(CANDIDATES, limit * 2)
    )
    shared_words = {hit.id for hit in found.keyword}
    found = dataclasses.replace(
        found,
        dense=[h for h in found.dense if h.score >= MIN_DENSE_SIMILARITY or h.id in shared_words],
    )
    scores = fuse(found)
    if not scores:
        return []
    best = sorted(scores, key=lambda i: -scores[i])[: limit * 2]
    # Candidates a pin among them would be recalled first for (see PIN_MIN_SIMILARITY).
    about = shared_words | {h.id for h in found.dense if h.score >= PIN_MIN_SIMILARITY}
    async with store.sessionmaker() as session:
        rows = (
            await session.scalars(
                select(Memory).where(
                    # The best few, and any pin the query is about wherever it ranked: one query.
                    or_(
                        Memory.id.in_(best),
                        and_(Memory.id.in_(sorted(about.difference(best))), Memory.pinned),
                    ),
                    Memory.state != MemoryState.DELETED.value,
                    Memory.personality_id == personality_id,
                    Memory.user_id == user_id,
                )
            )
        ).all()
        ranked = sorted(rows, key=lambda m: (-scores[m.id], -m.occurred_at.timestamp(), m.id))
        if ranked:
            ranked = _after_first(ranked, await _neighbours(session, ranked[0]))
    ranked = pins_first(ranked, about)
    return [
        RecalledMemory(
            id=m.id,
            score=scores.get(m.id, 0.0),
            content=m.content,
            content_verbatim=m.content_verbatim,
            source_message_ids=list(m.source_message_ids),
            occurred_at=m.occurred_at,
            summarized=m.summarized,
            summarizer=m.summarizer,
            pinned=m.pinned,
        )
        for m in ranked[:limit]
    ]


def pins_first(ranked: Sequence[Memory], about: Collection[uuid.UUID]) -> list[Memory]:
    """The pinned memories the query is `about` moved ahead, in their order; the rest after."""
    pins = [m for m in ranked if m.pinned and m.id in about]
    ahead = {m.id for m in pins}
    return pins + [m for m in ranked if m.id not in ahead]


def _after_first(ranked: Sequence[Memory], neighbours: Sequence[Memory]) -> list[Memory]:
    """The neighbours inserted right after the first memory, each memory once; the tail moves down."""
    seen = {ranked[0].id}
    out = [ranked[0]]
    for memory in [*neighbours, *ranked[1:]]:
        if memory.id not in seen:
            seen.add(memory.id)
            out.append(memory)
    return out


async def _neighbours(session: AsyncSession, memory: Memory) -> list[Memory]:
    """The memories of the same user just before and after this one in its conversation (not forgotten).

    Conversation order is the log order of each memory's first message. Only memories at the
    nearest earlier time, the same time, or the nearest later time are read: an imported transcript
    may give a whole session one timestamp.
    """
    if memory.conversation_id is None:
        return []
    same = (
        Memory.personality_id == memory.personality_id,
        Memory.user_id == memory.user_id,
        Memory.conversation_id == memory.conversation_id,
        Memory.state != MemoryState.DELETED.value,
    )
    at = memory.occurred_at
    earlier = select(func.max(Memory.occurred_at)).where(*same, Memory.occurred_at < at).scalar_subquery()
    later = select(func.min(Memory.occurred_at)).where(*same, Memory.occurred_at > at).scalar_subquery()
    rows = (
        await session.execute(
            select(Memory, Message.id)
            .join(
                Message,
                (Message.conversation_id == Memory.conversation_id)
                & (Message.external_id == Memory.source_message_ids[1]),
            )
            .where(*same, Memory.occurred_at.between(func.coalesce(earlier, at), func.coalesce(later, at)))
            .order_by(Memory.occurred_at, Message.id)
        )
    ).all()
    order = [m for m, _ in rows]
    position = next((i for i, m in enumerate(order) if m.id == memory.id), None)
    if position is None:
        return []
    return order[max(0, position - 1) : position] + order[position + 1 : position + 2]


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
