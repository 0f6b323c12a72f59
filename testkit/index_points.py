"""Points and queries as the vector index's tests build them: small dense vectors (DIM axes), a
memory's point with its payload, and what a dense search finds."""

from __future__ import annotations

import random
import uuid

from memory.recall.index import VectorIndex
from memory.recall.keywords import encode_sparse
from memory.types import IndexPoint, MemoryPayload, RecallFilter

DIM = 8


def axis(i: int, wobble: float = 0.0) -> list[float]:
    """A unit direction along axis i, optionally tilted towards the next axis."""
    vector = [0.0] * DIM
    vector[i % DIM] = 1.0
    vector[(i + 1) % DIM] = wobble
    return vector


def random_vector(rng: random.Random) -> list[float]:
    """A random direction (not normalised)."""
    return [rng.uniform(-1, 1) for _ in range(DIM)]


def point(
    dense: list[float],
    text: str = "",
    *,
    id: uuid.UUID | None = None,
    personality_id: int = 1,
    user_id: str = "alice",
    guild_id: str | None = "g1",
    channel_id: str | None = "c1",
    occurred_at: float = 1_710_000_000.0,
) -> IndexPoint:
    """A memory's point: this vector, keyword vector of `text`, and its payload (a DM when no guild)."""
    is_dm = guild_id is None
    return IndexPoint(
        id=id or uuid.uuid4(),
        dense=dense,
        sparse=encode_sparse(text),
        payload=MemoryPayload(
            personality_id=personality_id,
            user_id=user_id,
            guild_id=guild_id,
            channel_id=None if is_dm else channel_id,
            is_dm=is_dm,
            occurred_at=occurred_at,
        ),
    )


ALICE = RecallFilter(personality_id=1, user_id="alice")  # what `point`'s defaults are found by


async def dense_ids(
    index: VectorIndex, flt: RecallFilter, vector: list[float], limit: int = 10
) -> set[uuid.UUID]:
    """The ids a dense search finds (and no keyword hit)."""
    found = await index.search(dense=vector, sparse=None, flt=flt, limit=limit)
    assert found.keyword == []
    return {hit.id for hit in found.dense}
