"""Stored memories: their ids, their rows in Postgres and points in the index, kept in step; forgetting.

Postgres is the source of truth; the index only maps queries to memory ids. A memory's id derives from
its personality, venue and source messages, so a retried write rewrites the same row, and its state
says how far it got: formed (in Postgres), indexed (searchable too) or deleted (a tombstone).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, case, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from memory.recall.embedders import Embedder
from memory.recall.index import PAYLOAD_FIELDS, VectorIndex
from memory.recall.keyword_texts import logged_keyword_texts
from memory.recall.keywords import encode_keywords, keyword_text
from memory.recall.query import ParticipantNames
from memory.types import IndexPoint, MemoryPayload, MemoryState
from models import Memory

log = logging.getLogger(__name__)

MEMORY_ID_NAMESPACE = uuid.UUID("6f1c1a52-4e2b-4d7e-9a51-2b1f3c9e8d40")
# What a point is made of: the id, the text (and facts) for keywords, and the payload filters need.
POINT_FIELDS = ("id", "content", "content_verbatim", "fidelity_misses", "edited_at", *PAYLOAD_FIELDS)
# Columns a rewrite of an existing memory replaces; its identity and provenance stay.
_REWRITTEN = (
    "mode",
    "content",
    "content_verbatim",
    "source_chars",
    "summarized",
    "summarizer",
    "summary_fallback",
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
    """The index point of a memory row (a dict with POINT_FIELDS at least) and its dense vector.

    Its keywords come from the stored text: the verbatim exchange when kept, else the content and
    the facts the summary dropped. MemoryStore re-keys every point it writes from the message log
    (see `logged_keyword_texts`); these keywords stay only for a memory whose messages are gone, and
    for one its user corrected: it is found by the corrected words, not by what was said.
    """
    if fields.get("edited_at") is not None:
        kept = fields["content"]
    else:
        kept = fields.get("content_verbatim") or " ".join(
            [fields["content"], *(fields.get("fidelity_misses") or [])]
        )
    occurred_at = fields["occurred_at"]
    if occurred_at.tzinfo is None:
        # asyncpg reads PostgreSQL's ±infinity back naive (memory.transfer.moments): no moment in time.
        raise ValueError(f"its date {occurred_at} is no moment in time")
    payload = {name: fields[name] for name in PAYLOAD_FIELDS}
    payload["occurred_at"] = occurred_at.timestamp()
    return IndexPoint(
        id=fields["id"],
        dense=dense,
        sparse=encode_keywords(keyword_text(kept, occurred_at=fields["occurred_at"])),
        payload=MemoryPayload(**payload),
    )


def memory_points(
    memories: Sequence[Memory | Mapping[str, Any]], vectors: Sequence[list[float]]
) -> tuple[list[IndexPoint], list[uuid.UUID]]:
    """The points of these memories (rows, or dicts with POINT_FIELDS) and, apart, the ids of those
    whose point cannot be built (logged): one bad row must not keep the batch out of the index."""
    points: list[IndexPoint] = []
    unbuildable: list[uuid.UUID] = []
    for memory, vector in zip(memories, vectors, strict=True):
        fields = memory if isinstance(memory, Mapping) else point_fields(memory)
        try:
            points.append(memory_point(fields, vector))
        except (ValueError, OverflowError, TypeError) as exc:
            log.error("Memory %s cannot be indexed (%s): set aside", fields["id"], exc)
            unbuildable.append(fields["id"])
    return points, unbuildable


async def set_aside(session: AsyncSession, ids: Sequence[uuid.UUID]) -> None:
    """Mark live memories that cannot be indexed, so formation passes them by; `personae reindex`
    tries them again and `memory stats`, `reindex --check` and `db status` count them."""
    if ids:
        await session.execute(
            update(Memory)
            .where(Memory.id.in_(list(ids)), Memory.state != MemoryState.DELETED.value)
            .values(state=MemoryState.SET_ASIDE.value)
        )


@functools.cache
def _upsert_statement() -> Any:  # an Insert, typed loosely as SQLAlchemy's generics are
    """`upsert_memories`'s statement, built once and run with the rows as parameters (sent as multi-row
    VALUES by insertmanyvalues): built with `.values(rows)`, each batch compiled anew (40-75 ms)."""
    statement = insert(Memory)
    excluded = statement.excluded
    rewritten: dict[str, Any] = {column: excluded[column] for column in _REWRITTEN}
    # A pinned memory keeps its verbatim words whatever the new shape of it drops.
    rewritten["content_verbatim"] = case(
        (Memory.pinned, func.coalesce(excluded.content_verbatim, Memory.content_verbatim)),
        else_=excluded.content_verbatim,
    )
    return statement.on_conflict_do_update(
        index_elements=[Memory.id],
        set_=rewritten | {"updated_at": func.now()},
        # A forgotten memory stays forgotten, and a corrected one keeps its user's correction, even
        # if their messages are imported again.
        where=and_(Memory.state != MemoryState.DELETED.value, Memory.edited_at.is_(None)),
    ).returning(Memory.id)


async def upsert_memories(session: AsyncSession, rows: Sequence[Mapping[str, Any]]) -> set[uuid.UUID]:
    """Insert the rows (each with the same keys), or rewrite existing memories of the same id unless
    forgotten or corrected, in the session's transaction; the ids actually written."""
    if not rows:
        return set()
    connection = await session.connection()
    return set((await connection.execute(_upsert_statement(), list(rows))).scalars().all())


async def forget_rows(
    session: AsyncSession, *conditions: ColumnElement[bool], tombstone: bool = True
) -> list[uuid.UUID]:
    """Forget the live memories matching the conditions, in the session's transaction; their ids.

    A tombstone (the default) keeps the id with its text wiped: forming the same messages again
    (a re-import) must not bring it back. Without one the row goes, for an exchange to be formed anew.
    The caller drops the points from the index once committed (MemoryStore.drop_points).
    """
    where = and_(Memory.state != MemoryState.DELETED.value, *conditions)
    if tombstone:
        statement: Any = (
            update(Memory)
            .where(where)
            .values(state=MemoryState.DELETED.value, content="", content_verbatim=None, fidelity_misses=[])
        )
    else:
        statement = delete(Memory).where(where)
    return list((await session.scalars(statement.returning(Memory.id))).all())


def _may_be_poison(exc: Exception) -> bool:
    """Whether an index's refusal may be one point's fault: not when the index is out of reach (a
    connection, a timeout, a server error), which must stop the pass and leave the batch pending."""
    if isinstance(exc, OSError | TimeoutError) or type(exc).__name__ == "ResponseHandlingException":
        return False
    status = getattr(exc, "status_code", None)
    return not (isinstance(status, int) and status >= 500)


class MemoryStore:
    """The memories table and the vector index together: whatever is written to one reaches the other."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], index: VectorIndex, embedder: Embedder
    ) -> None:
        self.sessionmaker = sessionmaker
        self.index = index
        self.embedder = embedder
        # Who talks in a user's memories of a personality: left out of the dense query (recall).
        self.participants = ParticipantNames()
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

    async def rebuild_index(self) -> VectorIndex:
        """An empty collection for the embedder's dimension beside the serving one (VectorIndex.rebuild),
        to fill and then `swap_in`; the serving one need not fit the embedder (a new model)."""
        return await self.index.rebuild(self.embedder.dimension)

    async def swap_in(self, rebuilt: VectorIndex) -> None:
        """Serve from the rebuilt collection from now on."""
        await self.index.swap_in(rebuilt)
        self._collection_ready = True

    async def write_points(
        self, points: Sequence[IndexPoint], *, index: VectorIndex | None = None
    ) -> list[uuid.UUID]:
        """Upsert the points (into `index`, a rebuild's, or this store's), keyed from the message log
        (`logged_keyword_texts`) where it holds them; the ids of points the index refused one by one
        while it took the others (logged)."""
        if not points:
            return []
        async with self.sessionmaker() as session:
            texts = await logged_keyword_texts(session, [p.id for p in points])
        keyed = [dataclasses.replace(p, sparse=texts[p.id].encode()) if p.id in texts else p for p in points]
        index = index or await self.ready()
        try:
            await index.upsert(keyed)
        except Exception as exc:
            if len(keyed) == 1 or not _may_be_poison(exc):
                raise
            return await self._write_one_by_one(index, keyed)
        return []

    async def _write_one_by_one(self, index: VectorIndex, points: Sequence[IndexPoint]) -> list[uuid.UUID]:
        """A refused batch, point by point: the points it refuses alone are poison, unless it refuses
        them all (then the index itself is failing, and the error goes up as it came)."""
        refused: list[uuid.UUID] = []
        first_error: Exception | None = None
        for point in points:
            try:
                await index.upsert([point])
            except Exception as exc:
                log.error("The index refused memory %s (%s): set aside", point.id, exc)
                refused.append(point.id)
                first_error = first_error or exc
        if first_error is not None and len(refused) == len(points):
            raise first_error
        return refused

    async def rewrite_points(self, ids: Sequence[uuid.UUID]) -> None:
        """Write these live memories' points again, re-embedded and re-keyed (their log changed)."""
        async with self.sessionmaker() as session:
            memories = (
                await session.scalars(
                    select(Memory).where(Memory.id.in_(list(ids)), Memory.state != MemoryState.DELETED.value)
                )
            ).all()
        if memories:
            vectors = await self.embedder.embed([m.content for m in memories])
            points, unbuildable = memory_points(memories, vectors)
            refused = await self.write_points(points)
            if unbuildable or refused:
                async with self.sessionmaker.begin() as session:
                    await set_aside(session, [*unbuildable, *refused])

    async def index_points(self, points: list[IndexPoint], unbuildable: Sequence[uuid.UUID] = ()) -> None:
        """Write the points, then mark their memories indexed (unless deleted meanwhile); set aside
        those the index refused and those whose point could not be built (`memory_points`)."""
        refused = await self.write_points(points)
        written = [p.id for p in points if p.id not in set(refused)]
        async with self.sessionmaker.begin() as session:
            if written:
                await session.execute(
                    update(Memory)
                    .where(Memory.id.in_(written), Memory.state == MemoryState.FORMED.value)
                    .values(state=MemoryState.INDEXED.value)
                )
            await set_aside(session, [*unbuildable, *refused])

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
            await self.index_points(*memory_points(memories, vectors))
            done += len(memories)

    async def drop_points(self, ids: Sequence[uuid.UUID]) -> None:
        """Remove forgotten memories' points from the index (after their rows are committed)."""
        if ids:
            await (await self.ready()).delete(list(ids))
