"""The index on a Qdrant server or cluster (QDRANT_URL), shared by every process of a deployment."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from memory.recall import index as contract
from memory.recall.index import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    PayloadKind,
    QueryVector,
    ScrollOffset,
    VectorIndex,
    as_uuid,
    dense_vectors_by_id,
)
from memory.recall.keywords import KEYWORD_ENCODER
from memory.types import IndexPoint, RecallFilter, ScoredId, SparseVector

# The collection's metadata names the keyword encoder of its sparse vectors.
_KEYWORDS_KEY = "keyword_encoder"
_SCHEMA: dict[PayloadKind, Any] = {
    PayloadKind.INTEGER: qm.PayloadSchemaType.INTEGER,
    PayloadKind.KEYWORD: qm.PayloadSchemaType.KEYWORD,
    PayloadKind.BOOL: qm.PayloadSchemaType.BOOL,
    PayloadKind.FLOAT: qm.PayloadSchemaType.FLOAT,
}


def _field_schema(kind: PayloadKind, tenant: bool) -> Any:
    # is_tenant: the server co-locates each user's points, the filter every search starts from.
    if tenant:
        return qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
    return _SCHEMA[kind]


class QdrantServerIndex(VectorIndex):
    """The index on a Qdrant server or cluster (or qdrant-client's local mode in tests), shared by processes.

    Both sides of a search go in one `query_batch_points` call; the vectors are the same as Edge's
    (keyword vectors are computed client-side, memory.recall.keywords), so are the scores.
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

    async def rebuild(self, dense_dim: int) -> VectorIndex:
        """A new collection `<name>-<hex>` beside the serving one, which serves until `swap_in` points
        the name at it (a collection alias). Collections an interrupted rebuild left are dropped."""
        serving = await self._alias_target()
        for found in (await self._client.get_collections()).collections:
            if found.name.startswith(f"{self._collection}-") and found.name != serving:
                await self._client.delete_collection(found.name)
        rebuilt = QdrantServerIndex(self._client, f"{self._collection}-{uuid.uuid4().hex[:12]}")
        await rebuilt.ensure_collection(dense_dim)
        return rebuilt

    async def swap_in(self, rebuilt: VectorIndex) -> None:
        """Point the collection name at the rebuilt collection in one alias change, then drop the old
        one (the first rebuild of a name that is a collection itself drops it first: a moment of none)."""
        if not isinstance(rebuilt, QdrantServerIndex) or not rebuilt._collection.startswith(
            f"{self._collection}-"
        ):
            raise ValueError("swap_in takes the index rebuild() returned")
        async with self._setup_lock:
            old = await self._alias_target()
            operations: list[Any] = []
            if old is not None:
                operations.append(
                    qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=self._collection))
                )
            elif await self._client.collection_exists(self._collection):
                await self._client.delete_collection(self._collection)
            alias = qm.CreateAlias(collection_name=rebuilt._collection, alias_name=self._collection)
            operations.append(qm.CreateAliasOperation(create_alias=alias))
            await self._client.update_collection_aliases(change_aliases_operations=operations)
            if old is not None:
                await self._client.delete_collection(old)
            self._dense_dim = rebuilt._dense_dim

    async def _alias_target(self) -> str | None:
        """The collection the name is an alias of (after a rebuild); None while it is a collection."""
        aliases = (await self._client.get_aliases()).aliases
        return next((a.collection_name for a in aliases if a.alias_name == self._collection), None)

    async def _setup(self, dense_dim: int) -> None:
        if self._dense_dim == dense_dim:
            return
        if not await self._client.collection_exists(self._collection):
            try:
                await self._client.create_collection(
                    self._collection,
                    vectors_config={
                        DENSE_VECTOR: qm.VectorParams(
                            size=dense_dim,
                            distance=qm.Distance.COSINE,
                            datatype=qm.Datatype.FLOAT16,  # see memory.recall.index
                        )
                    },
                    sparse_vectors_config={SPARSE_VECTOR: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                    metadata={_KEYWORDS_KEY: KEYWORD_ENCODER},
                )
            except Exception:
                # Another process may have created it between our check and our create.
                if not await self._client.collection_exists(self._collection):
                    raise
        await self._check_existing(dense_dim)
        # Re-creating an existing payload index is a no-op on the server, so this stays idempotent.
        for field, kind, tenant in contract.payload_indexes():
            await self._client.create_payload_index(
                self._collection, field, field_schema=_field_schema(kind, tenant), wait=True
            )
        self._dense_dim = dense_dim

    async def _check_existing(self, dense_dim: int) -> None:
        info = await self._client.get_collection(self._collection)
        contract.warn_if_other_keyword_encoder(
            f"collection {self._collection!r}", (info.config.metadata or {}).get(_KEYWORDS_KEY)
        )
        vectors = info.config.params.vectors
        params = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        if params is None or params.size != dense_dim:
            found = params.size if params is not None else "none named 'dense'"
            raise contract.dimension_error(f"collection {self._collection!r}", found, dense_dim)

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
                    payload=contract.payload_dict(p.payload),
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

    async def _nearest(
        self, queries: list[tuple[str, QueryVector]], flt: RecallFilter, limit: int
    ) -> list[list[ScoredId]]:
        condition = _server_filter(flt)
        requests = [
            qm.QueryRequest(query=_server_vector(vector), using=name, filter=condition, limit=limit)
            for name, vector in queries
        ]
        results = await self._client.query_batch_points(self._collection, requests=requests)
        return [[ScoredId(id=as_uuid(p.id), score=p.score) for p in result.points] for result in results]

    async def dense_vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[float]]:
        """The dense vectors of these points by id (see VectorIndex.dense_vectors)."""
        if not ids:
            return {}
        records = await self._client.retrieve(
            self._collection, ids=[str(i) for i in ids], with_payload=False, with_vectors=[DENSE_VECTOR]
        )
        return dense_vectors_by_id(records)

    async def _scroll_page(
        self, personality_id: int | None, offset: ScrollOffset, limit: int
    ) -> tuple[list[uuid.UUID], ScrollOffset]:
        condition = (
            None
            if personality_id is None
            else qm.Filter(
                must=[qm.FieldCondition(key="personality_id", match=qm.MatchValue(value=personality_id))]
            )
        )
        records, next_offset = await self._client.scroll(
            self._collection,
            scroll_filter=condition,
            limit=limit,
            offset=str(offset) if isinstance(offset, uuid.UUID) else offset,
            with_payload=False,
            with_vectors=False,
        )
        return [as_uuid(r.id) for r in records], next_offset

    async def count(self) -> int:
        """The exact number of points."""
        return (await self._client.count(self._collection, exact=True)).count

    async def close(self) -> None:
        """Close the client."""
        await self._client.close()


def _server_vector(vector: QueryVector) -> list[float] | qm.SparseVector:
    if isinstance(vector, SparseVector):
        return qm.SparseVector(indices=vector.indices, values=vector.values)
    return vector


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
