"""Switch off one lever of recall at a time, for bench.recall_quality's ablation runs (--without).

The product has no switches for these: each one here replaces a function of memory.recall for the
bench process only, so the rest of the path stays the product's own.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memory.recall import question, ranking, relevance, search, store, venue
from memory.recall.index import Candidates
from memory.recall.keywords import keyword_text

RRF_K = 60  # the fusion before this work: equal-weight reciprocal rank fusion


def _keyword_text_without(drop: str) -> Callable[..., str]:
    def text(exchange: str, *, previous: str | None = None, occurred_at: datetime | None = None) -> str:
        return keyword_text(
            exchange,
            previous=None if drop == "previous" else previous,
            occurred_at=None if drop == "date" else occurred_at,
        )

    return text


async def _no_neighbours(*_: Any) -> dict[Any, Any]:
    return {}


def _names_kept(query: str, names: Any) -> str:
    return query


def _rrf(candidates: Candidates, **_: Any) -> dict[uuid.UUID, float]:
    fused: dict[uuid.UUID, float] = {}
    for hits in (candidates.dense, candidates.keyword):
        for rank, hit in enumerate(hits):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
    return fused


LEVERS: dict[str, tuple[Any, str, Any]] = {
    "neighbours": (search, "read_neighbours", _no_neighbours),
    "names": (venue, "dense_query", _names_kept),
    "date": (store, "keyword_text", _keyword_text_without("date")),
    "previous": (store, "keyword_text", _keyword_text_without("previous")),
    "blend": (search, "fuse", _rrf),
    "weights": (search, "fuse", functools.partial(ranking.fuse, dense_weight=0.5)),
    # Issue 22's levers, one at a time.
    "answer-kind": (relevance, "ANSWER_KIND_BONUS", 0.0),
    "floor": (relevance, "RELEVANCE_FLOOR", float("-inf")),
    "own-lines": (question, "OWN_LINES_SHARE", 0.0),
    "context-of-three": (search, "CONTEXT_HITS", 1),
    "head": (relevance, "HEAD_BONUS", 0.0),
    "about-user-dense": (search, "ABOUT_USER_DENSE_WEIGHT", ranking.DENSE_WEIGHT),
}


def switch_off(names: list[str]) -> None:
    """Replace each named lever by the behaviour without it (for this process)."""
    for name in names:
        module, attribute, replacement = LEVERS[name]
        setattr(module, attribute, replacement)
