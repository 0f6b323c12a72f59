"""Stored memories: their ids, their rows in Postgres and points in the index, kept in step; forgetting.

Postgres is the source of truth; the index only maps queries to memory ids. A memory's id derives from
its personality, venue and source messages, so a retried write rewrites the same row, and its state
says how far it got: formed (in Postgres), indexed (searchable too) or deleted (a tombstone).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.embedders import Embedder
from memory.recall.index import PAYLOAD_FIELDS, VectorIndex
from memory.recall.keywords import encode_sparse
from memory.types import IndexPoint, MemoryPayload, MemoryState
from models import Memory

MEMORY_ID_NAMESPACE = uuid.UUID("6f1c1a52-4e2b-4d7e-9a51-2b1f3c9e8d40")
# What a point is made of: the id, the text (and facts) for keywords, and the payload filters need.
POINT_FIELDS = ("id", "content", "fidelity_misses", *PAYLOAD_FIELDS)
# Columns a rewrite of an existing memory replaces; its identity and provenance stay.
_REWRITTEN = (
    "mode",
    "content",
    "content_verbatim",
    "source_chars",
    "summarized",
    "summarizer",
    "fidelity_misses",
    "embedding_model",
    "state",
    "occurred_at",
)


def memory_id(personality_id: int, venue_key: str, source_message_ids: Sequence[str]) -> uuid.UUID:
    """The same sources always give the same id: a retried write updates, never duplicates."""
    return uuid.uuid5(MEMORY_ID_NAMESPACE, f"{personality_id}|{venue_key}|" + "|".join(source_message_ids))


def point_fields(memory: Memory) -> dict[str, Any]:
    """What `memory_point` needs of a stored memory."""
    return {name: getattr(memory, name) for name in POINT_FIELDS}


def memory_point(fields: Mapping[str, Any], dense: list[float]) -> IndexPoint:
    """The index point of a memory row (a dict with POINT_FIELDS at least) and its dense vector."""
    # Facts the summary dropped stay findable by keyword: they are in the verbatim text we kept.
    misses = fields.get("fidelity_misses") or []
    keywords = " ".join([fields["content"], *misses])
    payload = {name: fields[name] for name in PAYLOAD_FIELDS}
    payload["occurred_at"] = fields["occurred_at"].timestamp()
    return IndexPoint(
        id=fields["id"], dense=dense, sparse=encode_sparse(keywords), payload=MemoryPayload(**payload)
    )


def upsert_memories(rows: list[dict[str, Any]]) -> Any:  # an Insert, typed loosely for .returning()
    """Insert the rows, or rewrite existing memories of the same id, unless they were forgotten."""
    statement = insert(Memory).values(rows)
    excluded = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[Memory.id],
        set_={column: excluded[column] for column in _REWRITTEN} | {"updated_at": func.now()},
        # A forgotten memory stays forgotten, even if its messages are imported again.
        where=Memory.state != MemoryState.DELETED.value,
    )


class MemoryStore:
    """The memories table and the vector index together: whatever is written to one reaches the other."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], index: VectorIndex, embedder: Embedder
    ) -> None:
        self.sessionmaker = sessionmaker
        self.index = index
        self.embedder = embedder
        self._collection_ready = False

    @property
    def embedding_model(self) -> str:
        return self.embedder.model_name

    async def ready(self) -> VectorIndex:
        """The index, its collection created (once) for the embedder's dimension."""
        if not self._collection_ready:
            await self.index.ensure_collection(self.embedder.dimension)
            self._collection_ready = True
        return self.index

    async def recreate_index(self) -> None:
        """An empty collection for the embedder's dimension (a full rebuild follows)."""
        await self.index.recreate(self.embedder.dimension)
        self._collection_ready = True

    async def index_points(self, points: list[IndexPoint]) -> None:
        """Upsert the points, then mark their memories indexed (unless deleted meanwhile)."""
        if not points:
            return
        await (await self.ready()).upsert(points)
        async with self.sessionmaker.begin() as session:
            await session.execute(
                update(Memory)
                .where(Memory.id.in_([p.id for p in points]), Memory.state == MemoryState.FORMED.value)
                .values(state=MemoryState.INDEXED.value)
            )

    async def index_pending(self, *, batch: int = 256) -> int:
        """Index memories written to Postgres but not yet searchable (after a crash, say)."""
        await self.ready()
        done = 0
        while True:
            async with self.sessionmaker() as session:
                memories = (
                    await session.scalars(
                        select(Memory)
                        .where(Memory.state == MemoryState.FORMED.value)
                        .order_by(Memory.id)
                        .limit(batch)
                    )
                ).all()
            if not memories:
                return done
            vectors = await self.embedder.embed([m.content for m in memories])
            await self.index_points(
                [memory_point(point_fields(m), v) for m, v in zip(memories, vectors, strict=True)]
            )
            done += len(memories)

    async def forget(
        self,
        *,
        user_id: str,
        personality_id: int | None = None,
        memory_ids: Sequence[uuid.UUID] | None = None,
    ) -> int:
        """Delete the user's memories (all, one personality's, or the given ids); returns how many."""
        conditions = [Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value]
        if personality_id is not None:
            conditions.append(Memory.personality_id == personality_id)
        if memory_ids is not None:
            conditions.append(Memory.id.in_(list(memory_ids)))
        async with self.sessionmaker.begin() as session:
            # A tombstone, text wiped: re-importing the same messages must not bring it back.
            deleted = (
                await session.scalars(
                    update(Memory)
                    .where(and_(*conditions))
                    .values(
                        state=MemoryState.DELETED.value, content="", content_verbatim=None, fidelity_misses=[]
                    )
                    .returning(Memory.id)
                )
            ).all()
        if deleted:
            await (await self.ready()).delete(list(deleted))
        return len(deleted)
