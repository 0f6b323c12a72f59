"""Which index backend a deployment opens: the embedded Qdrant Edge index, or a Qdrant server."""

from __future__ import annotations

from pathlib import Path

from memory.recall.index import VectorIndex


def open_vector_index(
    *,
    qdrant_url: str | None,
    qdrant_api_key: str | None,
    data_dir: Path,
    collection: str = "memories",
    rebuild_if_damaged: bool = False,
) -> VectorIndex:
    """Open the embedded Edge index under data_dir, or the Qdrant server at qdrant_url when it is set.

    A damaged embedded index raises IndexDamagedError, unless rebuild_if_damaged (a full reindex is
    about to refill it from PostgreSQL), which starts it empty instead.
    """
    # Each backend's client library is imported only when that backend is chosen.
    if qdrant_url:
        from qdrant_client import AsyncQdrantClient

        from memory.recall.server import QdrantServerIndex

        return QdrantServerIndex(AsyncQdrantClient(url=qdrant_url, api_key=qdrant_api_key), collection)
    from memory.recall.edge import EdgeVectorIndex

    return EdgeVectorIndex(data_dir / "qdrant", rebuild_if_damaged=rebuild_if_damaged)
