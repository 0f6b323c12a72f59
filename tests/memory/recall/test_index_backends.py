"""What each VectorIndex backend does of its own: Edge on disk (reopened, float16, optimized, damaged),
the choice between Edge and a server, and the keyword encoder each records."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import qdrant_client
import qdrant_edge as edge
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from memory.recall.backends import open_vector_index
from memory.recall.edge import EdgeVectorIndex
from memory.recall.index import Candidates, IndexDamagedError
from memory.recall.keywords import KEYWORD_ENCODER, encode_sparse_query
from memory.recall.server import QdrantServerIndex
from testkit.index_points import ALICE, DIM, axis, dense_ids, point, random_vector

# qdrant-client's local mode warns that payload indexes are a no-op there; the server honours them.
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")


async def test_edge_reopens_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIM)
    towns = ["Lisbon", "Oporto", "Faro", "Braga"]
    points = [point(axis(i), f"a trip to {town}") for i, town in enumerate(towns)]
    await index.upsert(points)
    await index.delete([points[3].id])
    await index.close()

    reopened = EdgeVectorIndex(path)
    try:
        assert await reopened.count() == 3  # readable before ensure_collection: the shard exists
        await reopened.ensure_collection(DIM)
        assert await reopened.ids() == {p.id for p in points[:3]}
        hits = await reopened.search(dense=axis(2), sparse=encode_sparse_query("Faro"), flt=ALICE, limit=3)
        assert hits.dense[0].id == hits.keyword[0].id == points[2].id
        braga = await reopened.search(dense=None, sparse=encode_sparse_query("Braga"), flt=ALICE, limit=3)
        assert braga == Candidates(dense=[], keyword=[])
    finally:
        await reopened.close()


async def test_dense_vectors_are_stored_as_float16_and_an_older_float32_index_still_serves(
    tmp_path: Path,
) -> None:
    # Edge exposes no config getter: the shard's own config file says how it stores vectors.
    new = EdgeVectorIndex(tmp_path / "new")
    await new.ensure_collection(DIM)
    await new.close()
    stored = json.loads((tmp_path / "new" / "shard" / "edge_config.json").read_text())
    assert stored["vectors"]["dense"]["datatype"] == "float16"

    # A shard made before (float32) opens with its own config, and is searched and written as before.
    old = tmp_path / "old"
    (old / "shard").mkdir(parents=True)
    config = edge.EdgeConfig(
        vectors={"dense": edge.EdgeVectorParams(size=DIM, distance=edge.Distance.Cosine)},
        sparse_vectors={"sparse": edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
    )
    edge.EdgeShard.create(str(old / "shard"), config).close()
    (old / "keyword-encoder").write_text(KEYWORD_ENCODER + "\n")
    index = EdgeVectorIndex(old)
    try:
        await index.ensure_collection(DIM)
        points = [point(axis(i), f"a trip to {town}") for i, town in enumerate(["Lisbon", "Faro"])]
        await index.upsert(points)
        assert await dense_ids(index, ALICE, axis(1), limit=1) == {points[1].id}
    finally:
        await index.close()
    assert "datatype" not in json.loads((old / "shard" / "edge_config.json").read_text())["vectors"]["dense"]

    client = AsyncQdrantClient(location=":memory:")
    server = QdrantServerIndex(client, "memories")
    await server.ensure_collection(DIM)
    try:
        collection = await client.get_collection("memories")
        vectors = collection.config.params.vectors
        assert isinstance(vectors, dict)
        assert vectors["dense"].datatype == qm.Datatype.FLOAT16
    finally:
        await server.close()


async def test_edge_requires_ensure_collection_on_a_new_path(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "fresh")
    try:
        with pytest.raises(RuntimeError, match="ensure_collection"):
            await index.upsert([point(axis(0))])
    finally:
        await index.close()


async def test_edge_optimizes_into_hnsw_and_keeps_answering(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "qdrant", optimize_after=10)
    await index.ensure_collection(DIM)
    rng = random.Random(3)
    try:
        points = [point(random_vector(rng)) for _ in range(25)]
        for start in range(0, 25, 5):
            await index.upsert(points[start : start + 5])  # crosses optimize_after: runs in the background
        await index.optimize()
        assert await index.count() == 25
        hits = await index.search(dense=points[7].dense, sparse=None, flt=ALICE, limit=1)
        assert [h.id for h in hits.dense] == [points[7].id]
    finally:
        await index.close()


async def test_open_vector_index_chooses_by_qdrant_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded = open_vector_index(qdrant_url=None, qdrant_api_key=None, data_dir=tmp_path)
    try:
        assert isinstance(embedded, EdgeVectorIndex)
        assert (tmp_path / "qdrant").is_dir()
    finally:
        await embedded.close()

    made: list[dict[str, object]] = []

    def client(**kwargs: object) -> AsyncQdrantClient:
        made.append(kwargs)
        return AsyncQdrantClient(location=":memory:")

    monkeypatch.setattr(qdrant_client, "AsyncQdrantClient", client)  # imported when the server is chosen
    server = open_vector_index(qdrant_url="http://qdrant:6333", qdrant_api_key="k3y", data_dir=tmp_path)
    try:
        assert isinstance(server, QdrantServerIndex)
        assert made == [{"url": "http://qdrant:6333", "api_key": "k3y"}]
        await server.ensure_collection(DIM)
        assert await server.count() == 0
    finally:
        await server.close()


async def test_edge_warns_when_its_keywords_come_from_another_encoder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "qdrant"
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIM)
    await index.close()
    assert (path / "keyword-encoder").read_text().strip() == KEYWORD_ENCODER

    reopened = EdgeVectorIndex(path)
    try:
        await reopened.ensure_collection(DIM)
        assert "personae reindex" not in caplog.text  # same encoder: nothing to say
    finally:
        await reopened.close()

    (path / "keyword-encoder").unlink()  # an index built before the encoder was recorded
    old = EdgeVectorIndex(path)
    try:
        await old.ensure_collection(DIM)
        assert "keyword search will miss until you run `personae reindex`" in caplog.text
        assert str(path) in caplog.text
        caplog.clear()
        await old.recreate(DIM)  # what `personae reindex` does first
        assert (path / "keyword-encoder").read_text().strip() == KEYWORD_ENCODER
    finally:
        await old.close()


async def test_server_warns_when_its_keywords_come_from_another_encoder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = AsyncQdrantClient(location=":memory:")
    fresh = QdrantServerIndex(client, "fresh")
    await fresh.ensure_collection(DIM)
    assert "personae reindex" not in caplog.text
    assert (await client.get_collection("fresh")).config.metadata == {"keyword_encoder": KEYWORD_ENCODER}

    await client.create_collection(
        "old", vectors_config={"dense": qm.VectorParams(size=DIM, distance=qm.Distance.COSINE)}
    )
    await QdrantServerIndex(client, "old").ensure_collection(DIM)
    assert "collection 'old'" in caplog.text
    assert "`personae reindex`" in caplog.text
    await client.close()


async def test_a_damaged_edge_index_is_one_line_naming_reindex_or_starts_empty_to_rebuild(
    tmp_path: Path,
) -> None:
    path = tmp_path / "qdrant"
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIM)
    await index.upsert([point(axis(0), "hello")])
    await index.close()
    for file in (f for f in path.rglob("*") if f.is_file() and f.name != "personae.lock"):
        file.write_bytes(b"\x00garbage\xff" * 8)  # every file keeps its name and loses its content

    with pytest.raises(IndexDamagedError) as refused:
        EdgeVectorIndex(path)
    said = str(refused.value)
    assert str(path) in said and "personae reindex" in said and "\n" not in said
    with pytest.raises(IndexDamagedError):  # not IndexBusyError: the refused opener let go of its lock
        EdgeVectorIndex(path)

    rebuilt = EdgeVectorIndex(path, rebuild_if_damaged=True)
    try:
        await rebuilt.ensure_collection(DIM)
        assert await rebuilt.count() == 0
        await rebuilt.upsert([point(axis(1), "again")])
        assert await rebuilt.count() == 1
    finally:
        await rebuilt.close()
