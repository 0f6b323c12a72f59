"""Keeping the index in step with Postgres: finding drift between them, and rebuilding the index.

Postgres is the source of truth, so the index can always be rebuilt from it, with the current
embedding model (a new model of another dimension needs exactly that).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, select, update

from memory.recall.store import MemoryStore, memory_points, set_aside
from memory.types import MemoryState, ProgressCallback
from models import Memory


@dataclass(frozen=True, slots=True)
class DriftReport:
    in_postgres: int
    in_index: int
    missing_from_index: int
    stale_in_index: int
    set_aside: int = 0  # memories that could not be indexed (MemoryState.SET_ASIDE), not drift

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
    aside = {i for i, state in rows if state == MemoryState.SET_ASIDE.value}
    indexed = await index.ids(personality_id)
    return DriftReport(
        in_postgres=len(live),
        in_index=len(indexed),
        missing_from_index=len(live - indexed - aside),
        stale_in_index=len(indexed - live),
        set_aside=len(aside),
    )


async def reindex(
    store: MemoryStore,
    *,
    personality_id: int | None = None,
    progress: ProgressCallback | None = None,
    batch: int = 256,
) -> int:
    """Rebuild the index from Postgres (re-embedding with the current model); returns memories indexed.

    For all personalities a new collection is built beside the old one (VectorIndex.rebuild), which
    keeps serving until the new one is complete and swapped in: an interrupted reindex leaves it
    whole. A new EMBEDDING_MODEL of another dimension works so, and so does a new keyword encoder (the
    index warns of an old one when it opens, see memory.recall.index). For one personality its points
    are rewritten in place. Points are keyed as formation keys them (MemoryStore.write_points), so a
    rebuilt index is the same. Memories set aside are tried again; one whose point still cannot be
    built or written stays set aside, and the others are indexed all the same.
    """
    query = select(Memory.id).where(Memory.state != MemoryState.DELETED.value)
    if personality_id is not None:
        query = query.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        live = set((await session.scalars(query)).all())
    rebuilding = personality_id is None
    if rebuilding:
        target = await store.rebuild_index()
    else:
        target = await store.ready()
        stale = await target.ids(personality_id) - live
        if stale:
            await target.delete(sorted(stale))
    ordered = sorted(live)
    written: list[uuid.UUID] = []
    unindexable: list[uuid.UUID] = []
    for start in range(0, len(ordered), batch):
        ids = ordered[start : start + batch]
        async with store.sessionmaker() as session:
            memories = (await session.scalars(select(Memory).where(Memory.id.in_(ids)))).all()
        vectors = await store.embedder.embed([m.content for m in memories])
        points, unbuildable = memory_points(memories, vectors)
        refused = set(await store.write_points(points, index=target))
        unindexable += [*unbuildable, *refused]
        done = [p.id for p in points if p.id not in refused]
        if not rebuilding:
            await _mark_indexed(store, done)
        else:
            written += done  # marked once the new index serves: until then the old one does
        if progress is not None:
            progress(len(memories))
    if rebuilding:
        await store.swap_in(target)
        for start in range(0, len(written), batch * 16):
            await _mark_indexed(store, written[start : start + batch * 16])
    async with store.sessionmaker.begin() as session:
        await set_aside(session, unindexable)
    return len(ordered) - len(unindexable)


async def _mark_indexed(store: MemoryStore, ids: list[uuid.UUID]) -> None:
    if ids:
        async with store.sessionmaker.begin() as session:
            await session.execute(
                update(Memory)
                .where(Memory.id.in_(ids), Memory.state != MemoryState.DELETED.value)
                .values(state=MemoryState.INDEXED.value, embedding_model=store.embedding_model)
            )
