"""/memory browse and the 🧠 receipt (one page view) mark a superseded memory with its date and the
correction that superseded it (issue 31)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from bot.memory.browse_view import memory_line
from memory.recall.superseded import Superseded
from memory.service import BrowsedMemory


def browsed(superseded: Superseded | None) -> BrowsedMemory:
    return BrowsedMemory(
        id=uuid.uuid4(),
        personality_name="Lilith",
        occurred_at=datetime(2026, 11, 1, tzinfo=UTC),
        content="Thistle won a blue ribbon.",
        pinned=False,
        edited=False,
        superseded=superseded,
    )


def test_a_superseded_memory_shows_since_when_and_by_what() -> None:
    mark = Superseded(datetime(2026, 11, 27, tzinfo=UTC), "My horse is called Bramble.")
    line = memory_line(1, browsed(mark), room=500)
    assert '🚫 superseded 2026-11-27 by "My horse is called Bramble."' in line
    forgotten = memory_line(1, browsed(Superseded(datetime(2026, 11, 27, tzinfo=UTC), None)), room=500)
    assert "superseded 2026-11-27 (forgotten)" in forgotten
    assert "superseded" not in memory_line(1, browsed(None), room=500)
