"""Keeping the index in step with Postgres: finding drift between them, and rebuilding the index.

Postgres is the source of truth, so the index can always be rebuilt from it, with the current
embedding model (a new model of another dimension needs exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update

from memory.recall.store import MemoryStore, memory_point, point_fields
from memory.types import MemoryState, ProgressCallback
from models import Memory


@dataclass(frozen=True, slots=True)
class DriftReport:
    in_postgres: int
    in_index: int
    missing_from_index: int
    stale_in_index: int

    @property
    def drift(self) -> bool:
        return bool(self.missing_from_index or self.stale_in_index)


async def lost_from_index(store: MemoryStore) -> int:
    """How many memories PostgreSQL counts as indexed while the index holds no point at all (its
    folder deleted, a new Qdrant server): recall finds nothing until `personae reindex`. 0 otherwise."""
    if await (await store.ready()).count() > 0:
        return 0
    async with store.sessionmaker() as session:
        query = select(func.count(Memory.id)).where(Memory.state == MemoryState.INDEXED.value)
        return int(await session.scalar(query) or 0)


async def check_drift(store: MemoryStore, *, personality_id: int | None = None) -> DriftReport:
    """Live memories missing from the index, and index points whose memory is gone."""
    index = await store.ready()
    query = select(Memory.id, Memory.state)
    if personality_id is not None:
        query = query.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        rows = (await session.execute(query)).all()
    live = {i for i, state in rows if state != MemoryState.DELETED.value}
    indexed = await index.ids(personality_id)
    return DriftReport(
        in_postgres=len(live),
        in_index=len(indexed),
        missing_from_index=len(live - indexed),
        stale_in_index=len(indexed - live),
    )


async def reindex(
    store: MemoryStore,
    *,
    personality_id: int | None = None,
    progress: ProgressCallback | None = None,
    batch: int = 256,
) -> int:
    """Rebuild the index from Postgres (re-embedding with the current model); returns memories indexed.

    For all personalities the collection is recreated empty first, so a new EMBEDDING_MODEL of
    another dimension works, and so does a new keyword encoder (the index warns of an old one when it
    opens, see memory.recall.index); for one personality its points are rewritten in place. Points
    are keyed as formation keys them (MemoryStore.write_points), so a rebuilt index is the same.
    """
    query = select(Memory.id).where(Memory.state != MemoryState.DELETED.value)
    if personality_id is not None:
        query = query.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        live = set((await session.scalars(query)).all())
    if personality_id is None:
        await store.recreate_index()
    else:
        index = await store.ready()
        stale = await index.ids(personality_id) - live
        if stale:
            await index.delete(sorted(stale))
    ordered = sorted(live)
    for start in range(0, len(ordered), batch):
        ids = ordered[start : start + batch]
        async with store.sessionmaker() as session:
            memories = (await session.scalars(select(Memory).where(Memory.id.in_(ids)))).all()
        vectors = await store.embedder.embed([m.content for m in memories])
        await store.write_points(
            [memory_point(point_fields(m), v) for m, v in zip(memories, vectors, strict=True)]
        )
        async with store.sessionmaker.begin() as session:
            await session.execute(
                update(Memory)
                .where(Memory.id.in_(ids), Memory.state != MemoryState.DELETED.value)
                .values(state=MemoryState.INDEXED.value, embedding_model=store.embedding_model)
            )
        if progress is not None:
            progress(len(memories))
    return len(ordered)
