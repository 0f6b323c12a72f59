"""The search index over long-term memories: Qdrant Edge in-process, or a Qdrant server with QDRANT_URL.

Postgres holds the memories; the index holds one point per memory (id = the memory's id) with a dense
vector, a sparse keyword vector and only the payload that filters need, and can be rebuilt at any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import qdrant_edge as edge
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from memory.errors import UserFacingError
from memory.types import IndexPoint, MemoryPayload, RecallFilter, ScoredId, SparseVector

__all__ = [
    "DENSE_VECTOR",
    "RRF_K",
    "SPARSE_VECTOR",
    "EdgeVectorIndex",
    "IndexBusyError",
    "QdrantServerIndex",
    "VectorIndex",
    "open_vector_index",
]

log = logging.getLogger(__name__)

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
# The customary RRF constant (Cormack et al.): a document's fused score barely depends on whether it
# was 1st or 3rd in one list, so agreement between the two lists decides the order.
RRF_K = 60
# Each side of a hybrid search contributes this many candidates per requested result: a document
# ranked low on one side and high on the other must still be in both lists to be fused.
_PREFETCH_FACTOR = 3
_SCROLL_PAGE = 1024
_LOCK_FILE = "personae.lock"
_SHARD_DIR = "shard"


class IndexBusyError(UserFacingError):
    """The embedded index directory is held by another process."""

    def __init__(self, path: Path, holder: str | None = None) -> None:
        held_by = f" (pid {holder})" if holder else ""
        super().__init__(
            f"The vector index at {path} is in use by another process{held_by}. The embedded index "
            "can be opened by one process at a time; set QDRANT_URL to a Qdrant server so that several "
            "processes can share it."
        )
        self.path = path


@runtime_checkable
class VectorIndex(Protocol):
    """Where memories are searched: one point per memory, its id the memory's id in Postgres.

    Contract shared by every implementation (tests/memory/test_vector_index.py runs one suite on all):

    - `ensure_collection(dense_dim)` is called before anything else and is idempotent. It creates a
      named dense vector "dense" (cosine) and a sparse vector "sparse" whose weights get IDF from the
      index (documents carry BM25 term-frequency weights, see memory.recall.keywords), plus payload indexes.
      An existing index whose dense dimension differs raises ValueError (a new embedding model needs a
      fresh index and `personae reindex`).
    - Payload keys: personality_id (int), user_id (str), guild_id (str, None for a DM), channel_id
      (str or None), is_dm (bool), occurred_at (float, epoch seconds UTC). Nothing else: text stays in
      Postgres.
    - `upsert` and `delete` are idempotent by id; deleting an unknown id is not an error. A completed
      upsert or delete is visible to the next search.
    - `search` returns at most `limit` hits, best first, only points that pass `flt`:
      personality_id and user_id must match; flt.guild_id None (a DM) allows every venue; otherwise
      guild_id must equal flt.guild_id, or the point is a DM memory and flt.allow_dm is true. A DM
      memory has is_dm true and guild_id None (Edge tests the latter, see _edge_filter).
      Scores are higher-is-better and comparable only within one result list:
        * dense and sparse given: Reciprocal Rank Fusion of the two lists, sum of 1 / (RRF_K + rank)
          with rank counted from 0, so in (0, 2 / RRF_K];
        * dense only: cosine similarity in [-1, 1];
        * sparse only: IDF-weighted BM25, >= 0 (only points sharing a term are returned).
      An empty sparse vector counts as no sparse vector.
    - `ids(personality_id)` is every id in the index (of one personality), for drift checks.
    - `count()` is the exact number of points.
    - `close()` releases the index; no call may be in flight or follow it.
    """

    async def ensure_collection(self, dense_dim: int) -> None: ...

    async def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    async def delete(self, ids: Sequence[uuid.UUID]) -> None: ...

    async def search(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: RecallFilter,
        limit: int,
    ) -> list[ScoredId]: ...

    async def recreate(self, dense_dim: int) -> None:
        """Drop every point and start an empty collection of dense_dim (a full rebuild, a new model)."""
        ...

    async def ids(self, personality_id: int | None = None) -> set[uuid.UUID]: ...

    async def count(self) -> int: ...

    async def close(self) -> None: ...


def open_vector_index(
    *, qdrant_url: str | None, qdrant_api_key: str | None, data_dir: Path, collection: str = "memories"
) -> VectorIndex:
    """Open the embedded Edge index under data_dir, or the Qdrant server at qdrant_url when it is set."""
    if qdrant_url:
        return QdrantServerIndex(AsyncQdrantClient(url=qdrant_url, api_key=qdrant_api_key), collection)
    return EdgeVectorIndex(data_dir / "qdrant")


def _payload_dict(payload: MemoryPayload) -> dict[str, Any]:
    return {
        "personality_id": payload.personality_id,
        "user_id": payload.user_id,
        "guild_id": payload.guild_id,
        "channel_id": payload.channel_id,
        "is_dm": payload.is_dm,
        "occurred_at": payload.occurred_at,
    }


def _as_uuid(point_id: object) -> uuid.UUID:
    return point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id))


def _usable_sparse(sparse: SparseVector | None) -> SparseVector | None:
    # A query of stopwords only encodes to nothing; searching with it would just return no hits.
    return sparse if sparse is not None and sparse.indices else None


def _prefetch_limit(limit: int) -> int:
    return max(limit * _PREFETCH_FACTOR, 20)


def _dimension_error(where: str, found: object, wanted: int) -> ValueError:
    return ValueError(
        f"The vector index {where} holds dense vectors of dimension {found}, but the embedder produces "
        f"{wanted}: remove the index (or point at another collection) and run `personae reindex`."
    )


# ---------------------------------------------------------------------------------------- Qdrant Edge


class EdgeVectorIndex:
    """The embedded index: Qdrant Edge (the Qdrant engine in-process, HNSW) persisted under `path`.

    One process at a time: an exclusive flock on `path/personae.lock` is taken in the constructor and
    released by close(); a second opener gets IndexBusyError. Edge's own WAL lock would also refuse,
    but with an opaque "WouldBlock" error and only once the shard exists.

    Edge is thread-safe (its Rust core synchronises internally; concurrent upserts, queries and
    optimize() from several threads were verified) and releases the GIL, so calls run in
    asyncio.to_thread without a lock: a filtered hybrid search over a large user history takes tens
    of milliseconds, too long to block the event loop.

    Edge builds HNSW only when optimize() is called (new points are brute-forced until then), so an
    optimization runs in the background once `optimize_after` points have been written since the
    last one, and once when an existing shard is opened.
    """

    def __init__(self, path: Path, *, optimize_after: int = 2000) -> None:
        self._path = path
        self._shard_path = path / _SHARD_DIR
        self._optimize_after = optimize_after
        self._written_since_optimize = 0
        self._optimizing: asyncio.Task[bool] | None = None
        path.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = _lock_directory(path)
        try:
            self._shard: edge.EdgeShard | None = (
                edge.EdgeShard.load(str(self._shard_path)) if self._shard_exists() else None
            )
        except BaseException:
            self._release_lock()
            raise
        self._dense_dim: int | None = None
        self._setup_lock = asyncio.Lock()

    def _shard_exists(self) -> bool:
        return (self._shard_path / "edge_config.json").exists()

    def _require_shard(self) -> edge.EdgeShard:
        if self._shard is None:
            raise RuntimeError(
                f"The vector index at {self._path} has no collection: call ensure_collection first"
            )
        return self._shard

    async def ensure_collection(self, dense_dim: int) -> None:
        """Create the shard and its payload indexes, or check that the existing one fits dense_dim."""
        # Services sharing this index may all call it at once; only one may create the shard.
        async with self._setup_lock:
            if self._dense_dim == dense_dim:
                return
            if self._shard is None:
                self._shard = await asyncio.to_thread(self._create_shard, dense_dim)
            else:
                await asyncio.to_thread(self._check_dimension, self._shard, dense_dim)
                self._start_optimizing()
            self._dense_dim = dense_dim

    async def recreate(self, dense_dim: int) -> None:
        """Drop the shard and create an empty one of dense_dim."""
        async with self._setup_lock:
            if self._optimizing is not None:
                await asyncio.shield(self._optimizing)
            shard, self._shard = self._shard, None
            if shard is not None:
                await asyncio.to_thread(shard.close)
            await asyncio.to_thread(shutil.rmtree, self._shard_path, True)
            self._shard = await asyncio.to_thread(self._create_shard, dense_dim)
            self._dense_dim = dense_dim
            self._written_since_optimize = 0

    def _create_shard(self, dense_dim: int) -> edge.EdgeShard:
        config = edge.EdgeConfig(
            vectors={DENSE_VECTOR: edge.EdgeVectorParams(size=dense_dim, distance=edge.Distance.Cosine)},
            sparse_vectors={SPARSE_VECTOR: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
        )
        shard = edge.EdgeShard.create(str(self._shard_path), config)
        for field, schema in (
            ("personality_id", edge.PayloadSchemaType.Integer),
            ("user_id", edge.PayloadSchemaType.Keyword),
            ("guild_id", edge.PayloadSchemaType.Keyword),
            ("channel_id", edge.PayloadSchemaType.Keyword),
            ("is_dm", edge.PayloadSchemaType.Bool),
            ("occurred_at", edge.PayloadSchemaType.Float),
        ):
            shard.update(edge.UpdateOperation.create_field_index(field, schema))
        shard.flush()
        return shard

    def _check_dimension(self, shard: edge.EdgeShard, dense_dim: int) -> None:
        # Edge exposes no config getter; a one-hit query is rejected with the stored dimension if it differs.
        probe = edge.QueryRequest(limit=1, query=edge.Query.Nearest([1.0] * dense_dim, using=DENSE_VECTOR))
        try:
            shard.query(probe)
        except Exception as exc:
            if "dimension" in str(exc).lower():
                raise _dimension_error(f"at {self._path}", str(exc), dense_dim) from exc
            raise

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points by id."""
        if not points:
            return
        shard = self._require_shard()
        operation = edge.UpdateOperation.upsert_points(
            [
                edge.Point(
                    p.id,
                    {
                        DENSE_VECTOR: p.dense,
                        SPARSE_VECTOR: edge.SparseVector(p.sparse.indices, p.sparse.values),
                    },
                    _payload_dict(p.payload),
                )
                for p in points
            ]
        )
        await asyncio.to_thread(shard.update, operation)
        self._written_since_optimize += len(points)
        if self._written_since_optimize >= self._optimize_after:
            self._start_optimizing()

    async def delete(self, ids: Sequence[uuid.UUID]) -> None:
        """Delete points by id; unknown ids are ignored."""
        if not ids:
            return
        shard = self._require_shard()
        await asyncio.to_thread(shard.update, edge.UpdateOperation.delete_points(list(ids)))

    async def search(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: RecallFilter,
        limit: int,
    ) -> list[ScoredId]:
        """Hybrid (RRF), dense-only or sparse-only search within flt, best first."""
        sparse = _usable_sparse(sparse)
        if (dense is None and sparse is None) or limit <= 0:
            return []
        shard = self._require_shard()
        condition = _edge_filter(flt)
        queries: list[edge.Query] = []
        if dense is not None:
            queries.append(edge.Query.Nearest(dense, using=DENSE_VECTOR))
        if sparse is not None:
            queries.append(
                edge.Query.Nearest(edge.SparseVector(sparse.indices, sparse.values), using=SPARSE_VECTOR)
            )
        if len(queries) == 1:
            request = edge.QueryRequest(limit=limit, query=queries[0], filter=condition)
        else:
            # The filter goes on each prefetch: a post-fusion filter would let other users' points
            # take candidate slots and then vanish, leaving fewer than `limit` hits.
            request = edge.QueryRequest(
                limit=limit,
                prefetches=[
                    edge.Prefetch(limit=_prefetch_limit(limit), query=q, filter=condition) for q in queries
                ],
                # The stub types Fusion.Rrf as a nested class rather than a Fusion; Edge accepts it.
                query=edge.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]
                filter=condition,
            )
        hits = await asyncio.to_thread(shard.query, request)
        return [ScoredId(id=_as_uuid(hit.id), score=hit.score) for hit in hits]

    async def ids(self, personality_id: int | None = None) -> set[uuid.UUID]:
        """Every id in the index, or those of one personality."""
        shard = self._require_shard()
        condition = (
            None
            if personality_id is None
            else edge.Filter(
                must=[edge.FieldCondition("personality_id", match=edge.MatchValue(personality_id))]
            )
        )
        return await asyncio.to_thread(self._scroll_ids, shard, condition)

    @staticmethod
    def _scroll_ids(shard: edge.EdgeShard, condition: edge.Filter | None) -> set[uuid.UUID]:
        found: set[uuid.UUID] = set()
        offset: Any = None
        while True:
            records, offset = shard.scroll(
                edge.ScrollRequest(
                    offset=offset, limit=_SCROLL_PAGE, filter=condition, with_payload=False, with_vector=False
                )
            )
            found.update(_as_uuid(r.id) for r in records)
            if offset is None:
                return found

    async def count(self) -> int:
        """The exact number of points."""
        shard = self._require_shard()
        return await asyncio.to_thread(shard.count, edge.CountRequest(exact=True))

    async def optimize(self) -> bool:
        """Build HNSW and merge segments now (blocking a worker thread); True if anything changed."""
        if self._optimizing is not None:
            return await asyncio.shield(self._optimizing)
        self._start_optimizing()
        assert self._optimizing is not None
        return await asyncio.shield(self._optimizing)

    def _start_optimizing(self) -> None:
        if self._optimizing is not None or self._shard is None:
            return
        self._written_since_optimize = 0
        self._optimizing = asyncio.create_task(self._run_optimizer(self._shard))

    async def _run_optimizer(self, shard: edge.EdgeShard) -> bool:
        try:
            return await asyncio.to_thread(shard.optimize)
        except Exception:
            # A failed optimization leaves the shard searchable (brute force); the next one retries.
            log.exception("Optimizing the vector index at %s failed", self._path)
            return False
        finally:
            self._optimizing = None

    async def close(self) -> None:
        """Wait for a running optimization, flush and close the shard, and release the directory lock."""
        if self._optimizing is not None:
            # optimize() cannot be interrupted inside Edge; closing under it would fail.
            await asyncio.shield(self._optimizing)
        shard, self._shard = self._shard, None
        try:
            if shard is not None:
                await asyncio.to_thread(_flush_and_close, shard)
        finally:
            self._release_lock()

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock


def _flush_and_close(shard: edge.EdgeShard) -> None:
    shard.flush()
    shard.close()


def _lock_directory(path: Path) -> int:
    """Hold an exclusive flock on path's lock file for as long as the descriptor stays open."""
    lock_path = path / _LOCK_FILE
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            holder = os.pread(fd, 32, 0).decode().strip() or None
        os.close(fd)
        raise IndexBusyError(path, holder) from None
    except BaseException:
        os.close(fd)
        raise
    # The pid is only for the busy message; the lock itself is the flock, which dies with the process.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _edge_filter(flt: RecallFilter) -> edge.Filter:
    must: list[Any] = [
        edge.FieldCondition("personality_id", match=edge.MatchValue(flt.personality_id)),
        edge.FieldCondition("user_id", match=edge.MatchValue(flt.user_id)),
    ]
    if flt.guild_id is not None:
        in_guild = edge.FieldCondition("guild_id", match=edge.MatchValue(flt.guild_id))
        if flt.allow_dm:
            # qdrant-edge-py 0.9.0 turns MatchValue(True) into the integer 1, which never matches a
            # boolean payload, so a DM memory is recognised by having no guild (null or absent) instead.
            must.append(edge.Filter(should=[in_guild, edge.IsEmptyCondition("guild_id")]))
        else:
            must.append(in_guild)
    return edge.Filter(must=must)


# ------------------------------------------------------------------------------------- Qdrant server


class QdrantServerIndex:
    """The index on a Qdrant server or cluster (or qdrant-client's local mode in tests), shared by processes.

    Hybrid search uses the query API with a parametrised RRF (RrfQuery, Qdrant server 1.16+), so that
    scores match the Edge index exactly.
    """

    def __init__(self, client: AsyncQdrantClient, collection: str) -> None:
        self._client = client
        self._collection = collection
        self._dense_dim: int | None = None
        self._setup_lock = asyncio.Lock()

    async def ensure_collection(self, dense_dim: int) -> None:
        """Create the collection and its payload indexes, or check that the existing one fits dense_dim."""
        async with self._setup_lock:
            await self._setup(dense_dim)

    async def recreate(self, dense_dim: int) -> None:
        """Delete the collection and create an empty one of dense_dim."""
        async with self._setup_lock:
            if await self._client.collection_exists(self._collection):
                await self._client.delete_collection(self._collection)
            self._dense_dim = None
            await self._setup(dense_dim)

    async def _setup(self, dense_dim: int) -> None:
        if self._dense_dim == dense_dim:
            return
        if not await self._client.collection_exists(self._collection):
            try:
                await self._client.create_collection(
                    self._collection,
                    vectors_config={
                        DENSE_VECTOR: qm.VectorParams(size=dense_dim, distance=qm.Distance.COSINE)
                    },
                    sparse_vectors_config={SPARSE_VECTOR: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                )
            except Exception:
                # Another process may have created it between our check and our create.
                if not await self._client.collection_exists(self._collection):
                    raise
        await self._check_dimension(dense_dim)
        # Re-creating an existing payload index is a no-op on the server, so this stays idempotent.
        for field, schema in (
            ("personality_id", qm.PayloadSchemaType.INTEGER),
            # is_tenant: the server co-locates each user's points, the filter every search starts from.
            ("user_id", qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)),
            ("guild_id", qm.PayloadSchemaType.KEYWORD),
            ("channel_id", qm.PayloadSchemaType.KEYWORD),
            ("is_dm", qm.PayloadSchemaType.BOOL),
            ("occurred_at", qm.PayloadSchemaType.FLOAT),
        ):
            await self._client.create_payload_index(self._collection, field, field_schema=schema, wait=True)
        self._dense_dim = dense_dim

    async def _check_dimension(self, dense_dim: int) -> None:
        info = await self._client.get_collection(self._collection)
        vectors = info.config.params.vectors
        params = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        if params is None or params.size != dense_dim:
            found = params.size if params is not None else "none named 'dense'"
            raise _dimension_error(f"collection {self._collection!r}", found, dense_dim)

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points by id (waits until they are searchable)."""
        if not points:
            return
        await self._client.upsert(
            self._collection,
            points=[
                qm.PointStruct(
                    id=str(p.id),
                    vector={
                        DENSE_VECTOR: p.dense,
                        SPARSE_VECTOR: qm.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                    },
                    payload=_payload_dict(p.payload),
                )
                for p in points
            ],
            wait=True,
        )

    async def delete(self, ids: Sequence[uuid.UUID]) -> None:
        """Delete points by id; unknown ids are ignored."""
        if not ids:
            return
        await self._client.delete(
            self._collection, points_selector=qm.PointIdsList(points=[str(i) for i in ids]), wait=True
        )

    async def search(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: RecallFilter,
        limit: int,
    ) -> list[ScoredId]:
        """Hybrid (RRF), dense-only or sparse-only search within flt, best first."""
        sparse = _usable_sparse(sparse)
        if (dense is None and sparse is None) or limit <= 0:
            return []
        condition = _server_filter(flt)
        sides: list[tuple[str, list[float] | qm.SparseVector]] = []
        if dense is not None:
            sides.append((DENSE_VECTOR, dense))
        if sparse is not None:
            sides.append((SPARSE_VECTOR, qm.SparseVector(indices=sparse.indices, values=sparse.values)))
        if len(sides) == 1:
            using, query = sides[0]
            response = await self._client.query_points(
                self._collection, query=query, using=using, query_filter=condition, limit=limit
            )
        else:
            response = await self._client.query_points(
                self._collection,
                prefetch=[
                    qm.Prefetch(query=q, using=using, filter=condition, limit=_prefetch_limit(limit))
                    for using, q in sides
                ],
                query=qm.RrfQuery(rrf=qm.Rrf(k=RRF_K)),
                query_filter=condition,
                limit=limit,
            )
        return [ScoredId(id=_as_uuid(p.id), score=p.score) for p in response.points]

    async def ids(self, personality_id: int | None = None) -> set[uuid.UUID]:
        """Every id in the collection, or those of one personality."""
        condition = (
            None
            if personality_id is None
            else qm.Filter(
                must=[qm.FieldCondition(key="personality_id", match=qm.MatchValue(value=personality_id))]
            )
        )
        found: set[uuid.UUID] = set()
        offset: Any = None
        while True:
            records, offset = await self._client.scroll(
                self._collection,
                scroll_filter=condition,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            found.update(_as_uuid(r.id) for r in records)
            if offset is None:
                return found

    async def count(self) -> int:
        """The exact number of points."""
        return (await self._client.count(self._collection, exact=True)).count

    async def close(self) -> None:
        """Close the client."""
        await self._client.close()


def _server_filter(flt: RecallFilter) -> qm.Filter:
    must: list[qm.Condition] = [
        qm.FieldCondition(key="personality_id", match=qm.MatchValue(value=flt.personality_id)),
        qm.FieldCondition(key="user_id", match=qm.MatchValue(value=flt.user_id)),
    ]
    if flt.guild_id is not None:
        in_guild = qm.FieldCondition(key="guild_id", match=qm.MatchValue(value=flt.guild_id))
        if flt.allow_dm:
            must.append(
                qm.Filter(should=[in_guild, qm.FieldCondition(key="is_dm", match=qm.MatchValue(value=True))])
            )
        else:
            must.append(in_guild)
    return qm.Filter(must=must)
