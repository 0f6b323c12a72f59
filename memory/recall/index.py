"""The search index over long-term memories: its contract and the payload it holds.

Postgres holds the memories; the index holds one point per memory (id = the memory's id) with a dense
vector, a sparse keyword vector and only the payload that filters need, and can be rebuilt at any time.
Two backends keep this contract: Qdrant Edge in-process (memory.recall.edge, the default) and a Qdrant
server with QDRANT_URL (memory.recall.server), opened by memory.recall.backends. The payload's
fields are `MemoryPayload`'s, named once.

Both store dense vectors as float16 (an index made before keeps its float32): half the vector bytes,
for unit-length embeddings of an int8 model whose own noise (cosine ~0.99 between batches) dwarfs
float16's (cosines within ~1e-3). 100,000 points after 300 searches (bench/index_memory.py): 366 MB
of RSS against 472, 411 MB on disk against 462, recall quality unchanged (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import logging
import typing
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.errors import UserFacingError
from memory.recall.keywords import KEYWORD_ENCODER
from memory.types import IndexPoint, MemoryPayload, RecallFilter, ScoredId, SparseVector

log = logging.getLogger(__name__)

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
SCROLL_PAGE = 1024

# Every search filters by user first: the user's field is the tenant, its points kept together.
TENANT_FIELD = "user_id"

QueryVector = list[float] | SparseVector  # a dense or a keyword query
ScrollOffset = int | str | uuid.UUID | None  # where the next page of ids starts; None: from the start


@dataclasses.dataclass(frozen=True, slots=True)
class Candidates:
    """What one search found on each side, best first: by meaning (dense) and by keyword (sparse)."""

    dense: list[ScoredId]
    keyword: list[ScoredId]


class IndexBusyError(UserFacingError):
    """The embedded index directory is held by another process."""

    def __init__(self, path: Path, holder: str | None = None) -> None:
        command = _personae_command(holder) if holder else None
        held_by = f" (pid {holder}: `{command}`)" if command else f" (pid {holder})" if holder else ""
        # A chat runs the recall and memory commands itself, on the index it holds (bot.cli.in_chat).
        in_chat = command is not None and command.startswith("personae chat")
        inside = " (/recall and /memory in that chat)" if in_chat else ""
        super().__init__(
            f"The vector index at {path} is in use by another process{held_by}. The embedded index "
            f"can be opened by one process at a time: run the command in that one{inside}, or set "
            "QDRANT_URL to a Qdrant server so that several processes can share it."
        )
        self.path = path


def _personae_command(pid: str) -> str | None:
    """The `personae ...` command process `pid` runs, as typed; None when it is none or is unknown."""
    try:
        words = Path(f"/proc/{int(pid)}/cmdline").read_bytes().decode().split("\0")
    except (OSError, ValueError):  # gone, not Linux, or no pid
        return None
    for at, word in enumerate(words):  # `personae ARGS`, or `python -m bot.cli ARGS`
        if Path(word).name == "personae" or word == "bot.cli":
            return " ".join(["personae", *(w for w in words[at + 1 :] if w)])
    return None


class IndexDamagedError(UserFacingError):
    """The embedded index directory cannot be read (a crash mid-write, a disk fault, a stray edit)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"The vector index at {path} is damaged ({reason}); run `personae reindex` to rebuild it "
            "from PostgreSQL (no memory is lost: the index holds only a copy)."
        )
        self.path = path


class VectorIndex(abc.ABC):
    """Where memories are searched: one point per memory, its id the memory's id in Postgres.

    Contract shared by every implementation (tests/memory/recall/test_index.py runs one suite on all):

    - `ensure_collection(dense_dim)` is called before anything else and is idempotent. It creates a
      named dense vector "dense" (cosine) and a sparse vector "sparse" whose weights get IDF from the
      index (documents carry BM25 term-frequency weights, see memory.recall.keywords), plus payload indexes.
      An existing index whose dense dimension differs raises ValueError (a new embedding model needs a
      fresh index and `personae reindex`).
    - Payload keys: the fields of MemoryPayload (PAYLOAD_FIELDS), each indexed by its kind. Nothing
      else: text stays in Postgres.
    - `upsert` and `delete` are idempotent by id; deleting an unknown id is not an error. A completed
      upsert or delete is visible to the next search.
    - `search` runs the nearest query of each side it is given, both within `flt` and in one round
      trip, and returns at most `limit` hits per side, best first (fusing them is the caller's job,
      memory.recall.ranking). Only points that pass `flt`: personality_id and user_id must match;
      flt.guild_id None (a DM) allows every venue; otherwise guild_id must equal flt.guild_id, or
      the point is a DM memory and flt.allow_dm is true. A DM memory has is_dm true and guild_id None
      (Edge tests the latter, see memory.recall.edge.edge_filter). Scores are higher-is-better:
        * `Candidates.dense`: cosine similarity in [-1, 1] (empty when no dense vector is given);
        * `Candidates.keyword`: IDF-weighted BM25, > 0, only points sharing a term with the query
          (empty when no sparse vector is given, or an empty one: a query of stopwords only).
    - The index remembers the keyword encoder (memory.recall.keywords.KEYWORD_ENCODER) it was
      created with; opening one made by another encoder logs a warning to run `personae reindex`
      (keyword search stays poor until then), and `recreate` starts with the current one.
    - `ids(personality_id)` is every id in the index (of one personality), for drift checks.
    - `count()` is the exact number of points.
    - `close()` releases the index; no call may be in flight or follow it.

    Each backend subclasses this: `search` and `ids` are written once here, over two hooks a
    backend implements (`_nearest`: the queries in one round trip; `_scroll_page`: a page of ids).
    Wrappers in tests may still stand in for it by delegation (duck typing).
    """

    @abc.abstractmethod
    async def ensure_collection(self, dense_dim: int) -> None: ...

    @abc.abstractmethod
    async def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    @abc.abstractmethod
    async def delete(self, ids: Sequence[uuid.UUID]) -> None: ...

    async def search(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: RecallFilter,
        limit: int,
    ) -> Candidates:
        """The nearest points of each side given, within flt, in one batch of queries."""
        sides: list[tuple[str, QueryVector | None]] = [
            (DENSE_VECTOR, dense),
            (SPARSE_VECTOR, usable_sparse(sparse)),
        ]
        asked = [(name, vector) for name, vector in sides if vector is not None]
        if not asked or limit <= 0:
            return Candidates(dense=[], keyword=[])
        results = iter(await self._nearest(asked, flt, limit))
        found = [next(results) if vector is not None else [] for _, vector in sides]
        return Candidates(dense=found[0], keyword=found[1])

    @abc.abstractmethod
    async def _nearest(
        self, queries: list[tuple[str, QueryVector]], flt: RecallFilter, limit: int
    ) -> list[list[ScoredId]]:
        """For each (vector name, query vector), its `limit` nearest points within flt, best first."""

    @abc.abstractmethod
    async def dense_vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[float]]:
        """The dense vectors of these points by id; an id not in the index is absent."""

    @abc.abstractmethod
    async def recreate(self, dense_dim: int) -> None:
        """Drop every point and start an empty collection of dense_dim (a full rebuild, a new model)."""

    async def rebuild(self, dense_dim: int) -> VectorIndex:
        """An empty index of dense_dim to fill, which `swap_in` then puts in this one's place.

        A backend that can build one beside itself keeps serving searches from the old points until
        the swap, so an interrupted rebuild leaves the old index whole (Edge does). This default
        empties this one in place and returns it.
        """
        await self.recreate(dense_dim)
        return self

    async def swap_in(self, rebuilt: VectorIndex) -> None:
        """Serve from `rebuilt` (from `rebuild`) from now on."""
        if rebuilt is not self:
            raise ValueError("swap_in takes the index rebuild() returned")

    async def ids(self, personality_id: int | None = None) -> set[uuid.UUID]:
        """Every id in the index, or those of one personality."""
        found: set[uuid.UUID] = set()
        offset: ScrollOffset = None
        while True:
            page, offset = await self._scroll_page(personality_id, offset, SCROLL_PAGE)
            found.update(page)
            if offset is None:
                return found

    @abc.abstractmethod
    async def _scroll_page(
        self, personality_id: int | None, offset: ScrollOffset, limit: int
    ) -> tuple[list[uuid.UUID], ScrollOffset]:
        """Up to `limit` ids (of one personality) from `offset`, and the next offset (None: done)."""

    @abc.abstractmethod
    async def count(self) -> int: ...

    @abc.abstractmethod
    async def close(self) -> None: ...


class PayloadKind(enum.Enum):
    """How a payload field is indexed for filtering, by its Python type."""

    INTEGER = int
    KEYWORD = str
    BOOL = bool
    FLOAT = float


def _kind(annotation: Any) -> PayloadKind:
    # `str | None` is a keyword that may be absent.
    present = [t for t in typing.get_args(annotation) if t is not type(None)] or [annotation]
    return PayloadKind(present[0])


# The payload's field list is written once, as MemoryPayload; backends and mappers read it here.
PAYLOAD_FIELDS: dict[str, PayloadKind] = {
    name: _kind(annotation) for name, annotation in typing.get_type_hints(MemoryPayload).items()
}


def payload_indexes() -> list[tuple[str, PayloadKind, bool]]:
    """Each payload field to index: its name, its kind, and whether it is the tenant (TENANT_FIELD)."""
    return [(field, kind, field == TENANT_FIELD) for field, kind in PAYLOAD_FIELDS.items()]


def payload_dict(payload: MemoryPayload) -> dict[str, Any]:
    """The payload as the index stores it."""
    return dataclasses.asdict(payload)


def as_uuid(point_id: object) -> uuid.UUID:
    return point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id))


def dense_vectors_by_id(records: Sequence[Any]) -> dict[uuid.UUID, list[float]]:
    """The dense vector of each retrieved record (Edge's or the server's: both carry `id` and a
    `vector` dict), by id; a record without one is left out."""
    found: dict[uuid.UUID, list[float]] = {}
    for record in records:
        vector = record.vector.get(DENSE_VECTOR) if isinstance(record.vector, dict) else None
        # A dense vector is a list of floats (a multi-vector, of lists): its first entry tells, where
        # testing all 384 cost ~0.3 ms of a recall's event loop.
        if isinstance(vector, list) and all(isinstance(x, float) for x in vector[:1]):
            found[as_uuid(record.id)] = typing.cast(list[float], vector)
    return found


def usable_sparse(sparse: SparseVector | None) -> SparseVector | None:
    # A query of stopwords only encodes to nothing; searching with it would just return no hits.
    return sparse if sparse is not None and sparse.indices else None


def dimension_error(where: str, found: object, wanted: int) -> ValueError:
    return ValueError(
        f"The vector index {where} holds dense vectors of dimension {found}, but the embedder produces "
        f"{wanted}: remove the index (or point at another collection) and run `personae reindex`."
    )


def warn_if_other_keyword_encoder(where: str, found: object) -> None:
    """Say once, on opening, that the index's keyword vectors come from another encoder than ours."""
    if found != KEYWORD_ENCODER:
        log.warning(
            "The vector index %s holds keyword vectors of encoder %s, not %s: keyword search will miss "
            "until you run `personae reindex`.",
            where,
            found or "(an older one)",
            KEYWORD_ENCODER,
        )


class IndexOpenedWhenUsed(VectorIndex):
    """The index opened by its first call rather than at once, for a command that may not need it: one
    that only reads PostgreSQL (a storage report, a user's memories listed) then runs while another
    process holds the embedded index. `close` closes it only if it was opened."""

    def __init__(self, open_index: typing.Callable[[], VectorIndex]) -> None:
        self._open_index = open_index
        self._index: VectorIndex | None = None

    def _opened(self) -> VectorIndex:
        if self._index is None:
            self._index = self._open_index()
        return self._index

    async def ensure_collection(self, dense_dim: int) -> None:
        await self._opened().ensure_collection(dense_dim)

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        await self._opened().upsert(points)

    async def delete(self, ids: Sequence[uuid.UUID]) -> None:
        await self._opened().delete(ids)

    async def search(
        self, *, dense: list[float] | None, sparse: SparseVector | None, flt: RecallFilter, limit: int
    ) -> Candidates:
        return await self._opened().search(dense=dense, sparse=sparse, flt=flt, limit=limit)

    async def _nearest(
        self, queries: list[tuple[str, QueryVector]], flt: RecallFilter, limit: int
    ) -> list[list[ScoredId]]:
        return await self._opened()._nearest(queries, flt, limit)

    async def dense_vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[float]]:
        return await self._opened().dense_vectors(ids)

    async def recreate(self, dense_dim: int) -> None:
        await self._opened().recreate(dense_dim)

    async def rebuild(self, dense_dim: int) -> VectorIndex:
        return await self._opened().rebuild(dense_dim)

    async def swap_in(self, rebuilt: VectorIndex) -> None:
        await self._opened().swap_in(rebuilt)

    async def ids(self, personality_id: int | None = None) -> set[uuid.UUID]:
        return await self._opened().ids(personality_id)

    async def _scroll_page(
        self, personality_id: int | None, offset: ScrollOffset, limit: int
    ) -> tuple[list[uuid.UUID], ScrollOffset]:
        return await self._opened()._scroll_page(personality_id, offset, limit)

    async def count(self) -> int:
        return await self._opened().count()

    async def close(self) -> None:
        if self._index is not None:
            await self._index.close()
