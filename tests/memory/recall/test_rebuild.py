"""Issue 33, item 1: a full rebuild fills a new collection beside the serving one, which answers
searches until the swap; a rebuild abandoned half-way leaves it whole, and the next one starts clean.
Both backends (Qdrant Edge, a Qdrant server in qdrant-client's local mode)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from memory.recall.edge import EdgeVectorIndex
from memory.recall.index import VectorIndex
from memory.recall.server import QdrantServerIndex
from testkit.index_points import ALICE, DIM, axis, dense_ids, point

# qdrant-client's local mode warns that payload indexes are a no-op there; the server honours them.
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")


@pytest.fixture(params=["edge", "server"])
async def opened(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Path, VectorIndex]]:
    idx: VectorIndex
    if request.param == "edge":
        idx = EdgeVectorIndex(tmp_path / "qdrant")
    else:
        idx = QdrantServerIndex(AsyncQdrantClient(location=":memory:"), "memories")
    await idx.ensure_collection(DIM)
    yield request.param, tmp_path / "qdrant", idx
    await idx.close()


async def test_the_old_index_serves_until_the_rebuilt_one_is_swapped_in(
    opened: tuple[str, Path, VectorIndex],
) -> None:
    _, _, index = opened
    old, new = uuid.uuid4(), uuid.uuid4()
    await index.upsert([point(axis(0), id=old)])
    rebuilt = await index.rebuild(DIM)
    await rebuilt.upsert([point(axis(0), id=new)])
    assert await dense_ids(index, ALICE, axis(0)) == {old}  # still the old one, while the new one fills
    await index.swap_in(rebuilt)
    assert await dense_ids(index, ALICE, axis(0)) == {new}
    assert await index.count() == 1
    again = await index.rebuild(DIM)  # a second rebuild swaps as well (the server: alias to alias)
    await again.upsert([point(axis(0), id=old)])
    await index.swap_in(again)
    assert await dense_ids(index, ALICE, axis(0)) == {old}


async def test_an_abandoned_rebuild_leaves_the_old_index_and_the_next_starts_clean(
    opened: tuple[str, Path, VectorIndex],
) -> None:
    kind, path, index = opened
    kept = uuid.uuid4()
    await index.upsert([point(axis(1), id=kept)])
    abandoned = await index.rebuild(DIM)
    await abandoned.upsert([point(axis(1))])
    if kind == "edge":  # the process died here: the index is opened again, as the next command does
        await abandoned.close()
        await index.close()
        index = EdgeVectorIndex(path)
        await index.ensure_collection(DIM)
        assert not (path / "rebuild").exists()
    assert await dense_ids(index, ALICE, axis(1)) == {kept}
    rebuilt = await index.rebuild(DIM)
    await index.swap_in(rebuilt)
    assert await index.count() == 0
    if kind == "edge":
        await index.close()
