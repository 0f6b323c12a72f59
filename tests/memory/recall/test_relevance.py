"""Relevance you can trust (issue 31): a question about nothing said recalls nothing, whatever words the
personality's replies happen to hold; a memory sharing no word with the question never rides along
with one that does. The demo's data (examples/lilith.jsonl) imported as `personae import` does, and
recalled through MemoryService; real PostgreSQL, Qdrant Edge and the local embedder."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.owners.personalities import PersonalityService
from memory.recall.question import read_question
from memory.service import MemoryService
from memory.transfer.transcript import read_transcript
from memory.wiring import MemoryServices
from testkit.memory_service import add_chat, add_personality

LILITH = Path(__file__).resolve().parents[3] / "examples" / "lilith.jsonl"


async def test_the_demos_unrelated_question_recalls_nothing(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, services: MemoryServices
) -> None:
    personality, _ = await PersonalityService(sessionmaker).create("lilith", display_name="Lilith")
    lines, skipped = read_transcript(LILITH)
    await services.transfer.import_transcript(
        lines,
        personality=personality,
        default_user_id=None,
        skipped_lines=skipped,
    )

    async def recall(query: str) -> list[str]:
        found = await service.recall(personality_id=personality.id, user_id="1002", query=query, limit=10)
        return [m.content for m in found]

    # "lecture" is in Lilith's reply ("without a lecture"), and only there.
    assert any("lecture" in line.content for line in lines if line.role == "assistant")
    assert await recall("quantum chromodynamics lecture") == []
    # Bob's own words still answer him.
    assert any("Turnip" in text for text in await recall("What is my dog called?"))


async def test_a_memory_sharing_nothing_with_the_question_is_not_returned(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    said = (
        "My bank PIN code is 4921, do not tell anyone.",
        "I went hiking in the Alps last summer.",
        "My favourite tea is lapsang souchong.",
    )
    for i, text in enumerate(said):
        await add_chat(sessionmaker, p, [("user", text), ("assistant", "Noted.")], prefix=f"t{i}")
    await service.form_pending()
    found = await service.recall(personality_id=p.id, user_id="u1", query="bank PIN code", limit=10)
    assert found and all("PIN" in m.content and m.score > 0 for m in found)
    assert await service.recall(personality_id=p.id, user_id="u1", query="how do tides work", limit=10) == []


def test_a_general_questions_topic_is_its_rarest_word() -> None:
    assert read_question("How do vaccines work?").topic == read_question("vaccines").topic
    assert read_question("what is the speed of sound").topic != read_question("sound").topic
