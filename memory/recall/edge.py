"""The embedded index: Qdrant Edge in-process, persisted under the data directory (the default backend)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as edge

from memory.recall.edge_swap import recover_interrupted_swap, swap_shard_folders
from memory.recall.index import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    IndexBusyError,
    IndexDamagedError,
    PayloadKind,
    QueryVector,
    ScrollOffset,
    VectorIndex,
    as_uuid,
    dense_vectors_by_id,
    dimension_error,
    payload_dict,
    payload_indexes,
    warn_if_other_keyword_encoder,
)
from memory.recall.keywords import KEYWORD_ENCODER
from memory.types import IndexPoint, RecallFilter, ScoredId, SparseVector

log = logging.getLogger(__name__)

_LOCK_FILE = "personae.lock"
_SHARD_DIR = "shard"
# `personae reindex` builds the new shard here and swaps it in whole (memory.recall.edge_swap).
_REBUILD_DIR = "rebuild"
# Which keyword encoder made the shard's sparse vectors (Edge keeps no metadata of ours).
_KEYWORDS_FILE = "keyword-encoder"
# The tenant (the user) is the only field given payload-aware HNSW links: every search filters by
# it, and links on one personality, one guild or timestamps serve none. At 50,000 points with a user
# of 2,500 (A/B under load, two rounds each): that user's search p50 1.45 -> 1.0 ms, p95 5.5-5.9 ->
# 1.4-3.4 ms, a typical user's the same, and optimize() as long (96-113 s against 101-105 s).
_INDEX_PARAMS: dict[PayloadKind, Callable[[bool], Any]] = {
    PayloadKind.INTEGER: lambda hnsw: edge.IntegerIndexParams(lookup=True, range=True, enable_hnsw=hnsw),
    PayloadKind.KEYWORD: lambda hnsw: edge.KeywordIndexParams(is_tenant=hnsw, enable_hnsw=hnsw),
    PayloadKind.BOOL: lambda hnsw: edge.BoolIndexParams(enable_hnsw=hnsw),
    PayloadKind.FLOAT: lambda hnsw: edge.FloatIndexParams(enable_hnsw=hnsw),
}


class EdgeVectorIndex(VectorIndex):
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

    def __init__(self, path: Path, *, optimize_after: int = 2000, rebuild_if_damaged: bool = False) -> None:
        self._path = path
        self._shard_path = path / _SHARD_DIR
        self._optimize_after = optimize_after
        self._written_since_optimize = 0
        self._optimizing: asyncio.Task[bool] | None = None
        path.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = _lock_directory(path)
        try:
            recover_interrupted_swap(self._shard_path, path / _REBUILD_DIR)
            self._shard: edge.EdgeShard | None = self._load_shard(rebuild_if_damaged)
        except BaseException:
            self._release_lock()
            raise
        self._dense_dim: int | None = None
        self._setup_lock = asyncio.Lock()

    def _load_shard(self, rebuild_if_damaged: bool) -> edge.EdgeShard | None:
        if not self._shard_exists():
            return None
        try:
            shard = edge.EdgeShard.load(str(self._shard_path))
        except Exception as exc:
            # Edge raises a bare Exception ("Service runtime error: IO Error: ...") for a shard it
            # cannot read; the index is derived from PostgreSQL, so a rebuild loses nothing.
            reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            if not rebuild_if_damaged:
                raise IndexDamagedError(self._path, reason) from None
            log.warning("The vector index at %s is damaged (%s); starting it empty", self._path, reason)
            shutil.rmtree(self._shard_path)
            return None
        # Loading replays the write-ahead log through ~150 MB of buffers that are freed at once, but
        # that glibc keeps resident unless asked (measured by bench/rss.py): give them back.
        _return_freed_memory()
        return shard

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
                warn_if_other_keyword_encoder(f"at {self._path}", self._keyword_encoder())
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

    async def rebuild(self, dense_dim: int) -> VectorIndex:
        """An empty index in a folder beside the shard; this one serves until `swap_in`."""
        staging = self._path / _REBUILD_DIR
        await asyncio.to_thread(shutil.rmtree, staging, True)  # what an interrupted rebuild left
        rebuilt = EdgeVectorIndex(staging, optimize_after=self._optimize_after)
        await rebuilt.ensure_collection(dense_dim)
        return rebuilt

    async def swap_in(self, rebuilt: VectorIndex) -> None:
        """Close the rebuilt index and move its shard into this one's place, then serve from it."""
        if not isinstance(rebuilt, EdgeVectorIndex) or rebuilt._path != self._path / _REBUILD_DIR:
            raise ValueError("swap_in takes the index rebuild() returned")
        dense_dim = rebuilt._dense_dim
        await rebuilt.close()
        async with self._setup_lock:
            if self._optimizing is not None:
                await asyncio.shield(self._optimizing)
            shard, self._shard = self._shard, None
            if shard is not None:
                await asyncio.to_thread(shard.close)
            await asyncio.to_thread(swap_shard_folders, rebuilt._shard_path, self._shard_path)
            (self._path / _KEYWORDS_FILE).write_text(KEYWORD_ENCODER + "\n", encoding="utf-8")
            self._shard = await asyncio.to_thread(edge.EdgeShard.load, str(self._shard_path))
            self._dense_dim = dense_dim
            self._written_since_optimize = 0
            await asyncio.to_thread(shutil.rmtree, rebuilt._path, True)
        self._start_optimizing()

    def _create_shard(self, dense_dim: int) -> edge.EdgeShard:
        config = edge.EdgeConfig(
            vectors={
                DENSE_VECTOR: edge.EdgeVectorParams(
                    size=dense_dim,
                    distance=edge.Distance.Cosine,
                    datatype=edge.VectorStorageDatatype.Float16,  # see memory.recall.index
                )
            },
            sparse_vectors={SPARSE_VECTOR: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
        )
        shard = edge.EdgeShard.create(str(self._shard_path), config)
        for field, kind, tenant in payload_indexes():
            shard.update(edge.UpdateOperation.create_field_index(field, _INDEX_PARAMS[kind](tenant)))
        shard.flush()
        (self._path / _KEYWORDS_FILE).write_text(KEYWORD_ENCODER + "\n", encoding="utf-8")
        return shard

    def _keyword_encoder(self) -> str | None:
        try:
            return (self._path / _KEYWORDS_FILE).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None  # a shard made before the encoder was recorded

    def _check_dimension(self, shard: edge.EdgeShard, dense_dim: int) -> None:
        # Edge exposes no config getter; a one-hit query is rejected with the stored dimension if it differs.
        probe = edge.QueryRequest(limit=1, query=edge.Query.Nearest([1.0] * dense_dim, using=DENSE_VECTOR))
        try:
            shard.query(probe)
        except Exception as exc:
            if "dimension" in str(exc).lower():
                raise dimension_error(f"at {self._path}", str(exc), dense_dim) from exc
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
                    payload_dict(p.payload),
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

    async def _nearest(
        self, queries: list[tuple[str, QueryVector]], flt: RecallFilter, limit: int
    ) -> list[list[ScoredId]]:
        shard = self._require_shard()
        condition = edge_filter(flt)
        batch = edge.QueryBatchRequest(
            [
                edge.QueryRequest(
                    limit=limit, query=edge.Query.Nearest(_edge_vector(v), using=n), filter=condition
                )
                for n, v in queries
            ]
        )
        results = await asyncio.to_thread(shard.query_batch, batch)
        return [[ScoredId(id=as_uuid(hit.id), score=hit.score) for hit in hits] for hits in results]

    async def dense_vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[float]]:
        """The dense vectors of these points by id (see VectorIndex.dense_vectors)."""
        if not ids:
            return {}
        shard = self._require_shard()
        records = await asyncio.to_thread(shard.retrieve, list(ids), False, [DENSE_VECTOR])
        return dense_vectors_by_id(records)

    async def _scroll_page(
        self, personality_id: int | None, offset: ScrollOffset, limit: int
    ) -> tuple[list[uuid.UUID], ScrollOffset]:
        shard = self._require_shard()
        condition = (
            None
            if personality_id is None
            else edge.Filter(
                must=[edge.FieldCondition("personality_id", match=edge.MatchValue(personality_id))]
            )
        )
        request = edge.ScrollRequest(
            offset=offset, limit=limit, filter=condition, with_payload=False, with_vector=False
        )
        records, next_offset = await asyncio.to_thread(shard.scroll, request)
        return [as_uuid(r.id) for r in records], next_offset

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


def _edge_vector(vector: QueryVector) -> list[float] | edge.SparseVector:
    return edge.SparseVector(vector.indices, vector.values) if isinstance(vector, SparseVector) else vector


def edge_filter(flt: RecallFilter) -> edge.Filter:
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


def _return_freed_memory() -> None:
    """Return the heap's free pages to the system (glibc's malloc_trim); elsewhere, nothing to do."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl, macOS)
        ctypes.CDLL("libc.so.6").malloc_trim(0)
