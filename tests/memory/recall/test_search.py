"""The fusion of the two sides of a search (end-to-end recall is in tests/memory/test_service.py)."""

from __future__ import annotations

import uuid

import pytest

from memory.recall.index import Candidates
from memory.recall.search import DENSE_WEIGHT, fuse, pins_first
from memory.types import ScoredId
from models import Memory

A, B, C, D = (uuid.UUID(int=i) for i in range(1, 5))


def test_fuse_blends_min_max_normalised_scores_with_the_keyword_side_weighing_more() -> None:
    found = Candidates(
        dense=[ScoredId(A, 0.9), ScoredId(B, 0.7), ScoredId(C, 0.5)],
        keyword=[ScoredId(C, 12.0), ScoredId(D, 4.0), ScoredId(A, 2.0)],
    )
    fused = fuse(found)
    assert fused[A] == pytest.approx(DENSE_WEIGHT * 1.0 + (1 - DENSE_WEIGHT) * 0.0)
    assert fused[B] == pytest.approx(DENSE_WEIGHT * 0.5)
    assert fused[C] == pytest.approx(DENSE_WEIGHT * 0.0 + (1 - DENSE_WEIGHT) * 1.0)
    assert fused[D] == pytest.approx((1 - DENSE_WEIGHT) * 0.2)
    # The keyword side's best beats the dense side's best: keywords weigh more (0.7 against 0.3).
    assert sorted(fused, key=lambda i: -fused[i]) == [C, A, B, D]
    assert all(0.0 <= score <= 1.0 for score in fused.values())


def test_fuse_ranks_what_both_sides_found_first() -> None:
    found = Candidates(
        dense=[ScoredId(A, 0.8), ScoredId(B, 0.79), ScoredId(C, 0.1)],
        keyword=[ScoredId(C, 9.0), ScoredId(B, 8.9), ScoredId(D, 0.5)],
    )
    fused = fuse(found)
    assert max(fused, key=lambda i: fused[i]) == B


def test_fuse_with_one_side_or_none() -> None:
    only_dense = fuse(Candidates(dense=[ScoredId(A, 0.4), ScoredId(B, 0.2)], keyword=[]))
    assert only_dense == {A: pytest.approx(DENSE_WEIGHT), B: 0.0}
    # A single hit, or equal scores, normalise to 1: nothing to tell apart on that side.
    assert fuse(Candidates(dense=[], keyword=[ScoredId(C, 3.0)])) == {C: pytest.approx(1 - DENSE_WEIGHT)}
    assert fuse(Candidates(dense=[], keyword=[])) == {}
    assert fuse(Candidates(dense=[ScoredId(A, 1.0)], keyword=[ScoredId(A, 1.0)]), dense_weight=0.5) == {
        A: pytest.approx(1.0)
    }


def test_pins_first_moves_only_the_pins_the_query_is_about() -> None:
    ranked = [
        Memory(id=A, pinned=False),
        Memory(id=B, pinned=True),
        Memory(id=C, pinned=True),
        Memory(id=D, pinned=False),
    ]
    # C is pinned but the query is not about it: it keeps its rank; B goes first.
    assert [m.id for m in pins_first(ranked, {A, B, D})] == [B, A, C, D]
    assert [m.id for m in pins_first(ranked, {A, B, C})] == [B, C, A, D]
    assert [m.id for m in pins_first(ranked, set())] == [A, B, C, D]
