"""One behavioural suite, run on every VectorIndex implementation (embedded Edge and the server
adapter), and the embedded index's rule of one process at a time (what each backend does of its own
besides: tests/memory/recall/test_index_backends.py)."""

from __future__ import annotations

import asyncio
import inspect
import random
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

import memory.recall.index as vector_index
from memory.recall.edge import EdgeVectorIndex
from memory.recall.index import (
    PAYLOAD_FIELDS,
    Candidates,
    IndexBusyError,
    PayloadKind,
    ScrollOffset,
    VectorIndex,
    payload_dict,
)
from memory.recall.keywords import encode_sparse_query
from memory.recall.ranking import DENSE_WEIGHT, fuse
from memory.recall.server import QdrantServerIndex
from memory.types import IndexPoint, MemoryPayload, RecallFilter, SparseVector
from testkit.index_points import ALICE, DIM, axis, dense_ids, point, random_vector

# qdrant-client's local mode warns that payload indexes are a no-op there; the server honours them.
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")


@pytest.fixture(params=["edge", "server"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    idx: VectorIndex
    if request.param == "edge":
        idx = EdgeVectorIndex(tmp_path / "qdrant")
    else:
        idx = QdrantServerIndex(AsyncQdrantClient(location=":memory:"), "memories")
    await idx.ensure_collection(DIM)
    yield idx
    await idx.close()


async def test_implementations_keep_the_protocol_signatures(index: VectorIndex) -> None:
    # Each backend subclasses the contract: its overrides (the hooks search and ids run on included)
    # must keep the signatures callers rely on.
    assert isinstance(index, VectorIndex)
    assert not inspect.isabstract(type(index))
    members = [name for name, member in vars(VectorIndex).items() if callable(member) and name[:2] != "__"]
    assert {"_nearest", "_scroll_page"} <= set(members)
    assert {
        "ensure_collection",
        "upsert",
        "delete",
        "search",
        "dense_vectors",
        "recreate",
        "ids",
        "count",
        "close",
    } <= set(members)
    for name in members:
        assert inspect.signature(getattr(type(index), name)) == inspect.signature(
            getattr(VectorIndex, name)
        ), name


def test_payload_fields_are_memory_payload_fields_with_their_kinds() -> None:
    payload = MemoryPayload(
        personality_id=1, user_id="u", guild_id=None, channel_id="c", is_dm=True, occurred_at=1.5
    )
    assert list(payload_dict(payload)) == list(PAYLOAD_FIELDS)
    assert PAYLOAD_FIELDS == {
        "personality_id": PayloadKind.INTEGER,
        "user_id": PayloadKind.KEYWORD,
        "guild_id": PayloadKind.KEYWORD,
        "channel_id": PayloadKind.KEYWORD,
        "is_dm": PayloadKind.BOOL,
        "occurred_at": PayloadKind.FLOAT,
    }


async def test_upsert_then_search_roundtrip(index: VectorIndex) -> None:
    points = [point(axis(i)) for i in range(3)]
    await index.upsert(points)

    hits = (await index.search(dense=axis(1), sparse=None, flt=ALICE, limit=3)).dense

    assert hits[0].id == points[1].id
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)  # cosine of identical directions
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert {h.id for h in hits} == {p.id for p in points}


async def test_dense_vectors_are_read_back_by_id(index: VectorIndex) -> None:
    points = [point(axis(i, wobble=0.5)) for i in range(3)]
    await index.upsert(points)
    absent = uuid.uuid4()

    found = await index.dense_vectors([points[0].id, points[2].id, absent])

    assert set(found) == {points[0].id, points[2].id}
    for p in (points[0], points[2]):
        stored = found[p.id]
        # Stored unit-length (cosine distance) and as float16: the direction comes back.
        norm = sum(x * x for x in p.dense) ** 0.5
        assert stored == pytest.approx([x / norm for x in p.dense], abs=2e-3)
    assert await index.dense_vectors([]) == {}


async def test_limit_bounds_the_hits(index: VectorIndex) -> None:
    rng = random.Random(1)
    await index.upsert([point(random_vector(rng)) for _ in range(12)])
    assert len((await index.search(dense=random_vector(rng), sparse=None, flt=ALICE, limit=5)).dense) == 5
    many = await index.search(
        dense=random_vector(rng), sparse=encode_sparse_query("no such word"), flt=ALICE, limit=5
    )
    assert len(many.dense) == 5


async def test_ensure_collection_is_idempotent_and_checks_dimension(index: VectorIndex) -> None:
    await index.upsert([point(axis(0))])
    await index.ensure_collection(DIM)
    assert await index.count() == 1
    with pytest.raises(ValueError, match="dimension"):
        await index.ensure_collection(DIM * 2)


@pytest.mark.parametrize("kind", ["edge", "server"])
async def test_concurrent_first_ensure_collection_creates_once(kind: str, tmp_path: Path) -> None:
    # Two services sharing one index both set it up on their first call.
    fresh: VectorIndex = (
        EdgeVectorIndex(tmp_path / "qdrant")
        if kind == "edge"
        else QdrantServerIndex(AsyncQdrantClient(location=":memory:"), "memories")
    )
    try:
        await asyncio.gather(*(fresh.ensure_collection(DIM) for _ in range(3)))
        await fresh.upsert([point(axis(0))])
        assert await fresh.count() == 1
    finally:
        await fresh.close()


async def test_upsert_is_idempotent_by_id(index: VectorIndex) -> None:
    first = point(axis(0))
    await index.upsert([first])
    await index.upsert([first])
    moved = point(axis(4), id=first.id)
    await index.upsert([moved])

    assert await index.count() == 1
    hits = (await index.search(dense=axis(4), sparse=None, flt=ALICE, limit=1)).dense
    assert hits[0].id == first.id
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)  # the replaced vector, not the first one


async def test_deleted_points_are_never_returned(index: VectorIndex) -> None:
    keep, gone = point(axis(0), "Zephyrine's garden"), point(axis(0), "Zephyrine's garden")
    await index.upsert([keep, gone])

    await index.delete([gone.id])
    await index.delete([gone.id, uuid.uuid4()])  # again, and an unknown id: both harmless

    assert await index.count() == 1
    assert await index.ids() == {keep.id}
    assert await dense_ids(index, ALICE, axis(0)) == {keep.id}
    sparse_hits = await index.search(dense=None, sparse=encode_sparse_query("Zephyrine"), flt=ALICE, limit=10)
    assert [h.id for h in sparse_hits.keyword] == [keep.id]
    assert sparse_hits.dense == []
    hybrid = await index.search(dense=axis(0), sparse=encode_sparse_query("Zephyrine"), flt=ALICE, limit=10)
    assert [h.id for h in hybrid.dense] == [h.id for h in hybrid.keyword] == [keep.id]


async def test_users_never_see_each_others_memories(index: VectorIndex) -> None:
    mine = point(axis(2), "my secret is Zephyrine", user_id="alice")
    theirs = point(axis(2), "my secret is Zephyrine", user_id="bob")
    await index.upsert([mine, theirs])
    bob = RecallFilter(personality_id=1, user_id="bob")

    assert await dense_ids(index, bob, axis(2)) == {theirs.id}
    hybrid = await index.search(dense=axis(2), sparse=encode_sparse_query("Zephyrine"), flt=bob, limit=10)
    assert [h.id for h in hybrid.dense] == [h.id for h in hybrid.keyword] == [theirs.id]
    stranger = RecallFilter(personality_id=1, user_id="carol")
    assert await index.search(
        dense=axis(2), sparse=encode_sparse_query("secret"), flt=stranger, limit=10
    ) == Candidates(dense=[], keyword=[])


async def test_personalities_never_see_each_others_memories(index: VectorIndex) -> None:
    first = point(axis(3), "Lisbon", personality_id=1)
    second = point(axis(3), "Lisbon", personality_id=2)
    await index.upsert([first, second])

    assert await dense_ids(index, RecallFilter(personality_id=2, user_id="alice"), axis(3)) == {second.id}
    assert await dense_ids(index, ALICE, axis(3)) == {first.id}


async def test_venue_rules(index: VectorIndex) -> None:
    in_a = point(axis(0), guild_id="guild-a")
    in_b = point(axis(0), guild_id="guild-b")
    in_dm = point(axis(0), guild_id=None)
    await index.upsert([in_a, in_b, in_dm])

    def venue(guild_id: str | None, allow_dm: bool = False) -> RecallFilter:
        return RecallFilter(personality_id=1, user_id="alice", guild_id=guild_id, allow_dm=allow_dm)

    assert await dense_ids(index, venue("guild-a"), axis(0)) == {in_a.id}
    assert await dense_ids(index, venue("guild-b"), axis(0)) == {in_b.id}
    assert await dense_ids(index, venue("guild-a", allow_dm=True), axis(0)) == {in_a.id, in_dm.id}
    assert await dense_ids(index, venue("guild-c", allow_dm=True), axis(0)) == {in_dm.id}
    # A DM query sees every venue of the user's memories, allow_dm or not.
    assert await dense_ids(index, venue(None), axis(0)) == {in_a.id, in_b.id, in_dm.id}


async def test_sparse_finds_a_rare_keyword_the_dense_side_misses(index: VectorIndex) -> None:
    # Ten memories close to the query's dense direction, one far away that names Zephyrine and a date.
    near = [point(axis(0, wobble=0.05 * i), f"we talked about the weather again {i}") for i in range(10)]
    named = point(axis(5), "went hiking with Zephyrine on 2024-03-15, talked about the weather")
    await index.upsert([*near, named])
    query_dense = axis(0)

    dense_only = await index.search(dense=query_dense, sparse=None, flt=ALICE, limit=3)
    assert named.id not in {h.id for h in dense_only.dense}

    for words in ("Zephyrine", "2024-03-15", "what did we do on 2024-03-15?"):
        hybrid = await index.search(dense=query_dense, sparse=encode_sparse_query(words), flt=ALICE, limit=3)
        fused = fuse(hybrid)
        assert named.id in sorted(fused, key=lambda i: -fused[i])[:3], words
        sparse_only = await index.search(dense=None, sparse=encode_sparse_query(words), flt=ALICE, limit=3)
        assert sparse_only.keyword[0].id == named.id, words


async def test_fusion_ranks_a_document_matching_both_sides_first(index: VectorIndex) -> None:
    dense_best = point(axis(0), "a quiet afternoon")  # nearest, no keyword
    keyword_only = point(axis(6), "Zephyrine bakes bread every single morning")  # keyword, far away
    both = point(axis(0, wobble=0.2), "Zephyrine, afternoon")  # second nearest; shorter, so first on BM25
    fillers = [point(axis(3, wobble=0.1 * i), f"filler note {i}") for i in range(6)]
    await index.upsert([dense_best, keyword_only, both, *fillers])

    found = await index.search(dense=axis(0), sparse=encode_sparse_query("Zephyrine"), flt=ALICE, limit=5)

    # Each side best first, with its own scores: cosine on the dense side, BM25 on the keyword side.
    assert [h.id for h in found.dense[:2]] == [dense_best.id, both.id]
    # Vectors are stored as float16: a cosine comes within ~1e-3 of the float one.
    assert found.dense[1].score == pytest.approx(1 / (1 + 0.2**2) ** 0.5, rel=2e-3)
    assert [h.id for h in found.keyword] == [both.id, keyword_only.id]
    assert found.keyword[0].score > found.keyword[1].score > 0
    for side in (found.dense, found.keyword):
        assert [h.score for h in side] == sorted((h.score for h in side), reverse=True)
    fused = fuse(found)
    ranked = sorted(fused, key=lambda i: -fused[i])
    assert ranked[:2] == [both.id, dense_best.id]
    assert {dense_best.id, keyword_only.id} <= set(ranked[1:])
    # Second of the dense list (its cosine, min-max normalised), first of the keyword list.
    assert fused[both.id] == pytest.approx(DENSE_WEIGHT * found.dense[1].score + (1 - DENSE_WEIGHT), rel=1e-4)


async def test_empty_sparse_vectors_are_accepted(index: VectorIndex) -> None:
    silent = IndexPoint(
        id=uuid.uuid4(), dense=axis(1), sparse=SparseVector([], []), payload=point(axis(1)).payload
    )
    await index.upsert([silent])

    nothing = Candidates(dense=[], keyword=[])
    assert (
        await index.search(dense=None, sparse=encode_sparse_query("the and"), flt=ALICE, limit=5) == nothing
    )
    hybrid = await index.search(dense=axis(1), sparse=encode_sparse_query("the"), flt=ALICE, limit=5)
    assert [h.id for h in hybrid.dense] == [silent.id]
    assert hybrid.keyword == []
    assert await index.search(dense=None, sparse=None, flt=ALICE, limit=5) == nothing


async def test_ids_and_count(index: VectorIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_index, "SCROLL_PAGE", 3)  # several pages with a handful of points
    rng = random.Random(7)
    first = [point(random_vector(rng), personality_id=1) for _ in range(7)]
    second = [point(random_vector(rng), personality_id=2, user_id="bob", guild_id=None) for _ in range(4)]
    assert await index.ids() == set()
    assert await index.count() == 0

    await index.upsert(first + second)

    assert await index.count() == 11
    pages: list[int] = []
    scroll_page = index._scroll_page

    async def counted(
        personality_id: int | None, offset: ScrollOffset, limit: int
    ) -> tuple[list[uuid.UUID], ScrollOffset]:
        pages.append(limit)
        return await scroll_page(personality_id, offset, limit)

    monkeypatch.setattr(index, "_scroll_page", counted)
    assert await index.ids() == {p.id for p in first + second}
    assert pages == [3, 3, 3, 3]  # 11 ids, 3 a page
    assert await index.ids(1) == {p.id for p in first}
    assert await index.ids(2) == {p.id for p in second}
    assert await index.ids(3) == set()


async def test_recreate_empties_and_changes_dimension(index: VectorIndex) -> None:
    await index.upsert([point(axis(0)), point(axis(1))])
    assert await index.count() == 2
    await index.recreate(DIM * 2)
    assert await index.count() == 0
    wider = point([1.0] + [0.0] * (DIM * 2 - 1))
    await index.upsert([wider])
    assert await index.ids() == {wider.id}
    await index.ensure_collection(DIM * 2)  # the new dimension is now the expected one


# ------------------------------------------------------------------ one process at a time (Edge)


BUSY_PROBE = """
import sys
from pathlib import Path
from memory.recall.edge import EdgeVectorIndex
from memory.recall.index import IndexBusyError
try:
    index = EdgeVectorIndex(Path(sys.argv[1]))
except IndexBusyError as exc:
    print(exc)
    sys.exit(3)
print("opened")
"""


def open_from_another_process(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BUSY_PROBE, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )


async def test_edge_refuses_a_second_process(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIM)
    try:
        busy = open_from_another_process(path)
        assert busy.returncode == 3, busy.stderr
        assert str(path) in busy.stdout
        assert "another process" in busy.stdout
        assert "QDRANT_URL" in busy.stdout
        with pytest.raises(IndexBusyError):
            EdgeVectorIndex(path)  # a second opener in the same process is refused too
    finally:
        await index.close()

    freed = open_from_another_process(path)
    assert freed.returncode == 0, freed.stdout + freed.stderr
    assert "opened" in freed.stdout
