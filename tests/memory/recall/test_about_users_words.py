"""A question without "I" or "my" may still ask about the user's life: "How much will the brake repair
cost?" after the user said their brake pads are worn is asked of their memories, with the low bar of a
question about them, so the memory holding the garage's quote (sharing no word with the question) is
recalled; "how many moons does Jupiter have" after "by the new moon" is not (a name it holds, Jupiter,
is nowhere in the user's words). Real PostgreSQL, Qdrant Edge and the local embedder."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from testkit.memory_service import add_chat, add_personality

SAID = (
    ("My car failed its MOT, the brake pads are worn, it's a 2014 Skoda Fabia.", "Do you have a garage?"),
    ("Garage quoted me 240 pounds for the pads and discs. Booked it in for Thursday.", "Fair price."),
    ("The parcel has to reach Lady Ysolde by the new moon.", "Then ride fast."),
    ("I'm learning the cello, my teacher says I'm ready for grade 4.", "Wonderful!"),
)


async def test_a_question_about_what_the_user_said_recalls_its_answer_and_a_general_one_nothing(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Juniper")
    for i, (line, reply) in enumerate(SAID):
        await add_chat(sessionmaker, p, [("user", line), ("assistant", reply)], prefix=f"t{i}")
    await service.form_pending()

    async def recall(query: str) -> list[str]:
        found = await service.recall(personality_id=p.id, user_id="u1", query=query, limit=10)
        return [m.content for m in found]

    assert any("240 pounds" in text for text in await recall("How much will the brake repair cost?"))
    assert await recall("how many moons does Jupiter have") == []
