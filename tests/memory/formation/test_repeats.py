"""No repeats: what a user says again reinforces the memory that says it (one row, said N times, its
messages among the memory's), never what differs in a fact, a negation or its subject; said in
another conversation it is a memory of its own that recall never shows beside the first. Real
PostgreSQL, Qdrant Edge, the local embedder."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from memory.transfer.export import MemoryExport
from testkit.memory_service import T0, add_chat, add_personality, memories

REPLY = "Thanks for telling me."


def said(*texts: str) -> list[tuple[str, str]]:
    return [turn for text in texts for turn in (("user", text), ("assistant", REPLY))]


async def test_a_fact_said_again_reinforces_its_memory_in_one_pass_and_across_passes(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    # Said twice in one formation pass (one batch), then again in a later one.
    await add_chat(sessionmaker, p, said("My dog is called Biscuit.", "My dog's name is Biscuit."))
    report = await service.form_pending()
    assert (report.exchanges, report.memories, report.repeats) == (2, 1, 1)
    assert report.remembered_message_ids == ["m0", "m2"]  # both remembered (📝), one memory
    await add_chat(sessionmaker, p, said("I have a dog named Biscuit."), start=4)
    assert (await service.form_pending()).repeats == 1
    [memory] = await memories(sessionmaker)
    assert memory.content == f"Alice: My dog is called Biscuit.\nSage: {REPLY}"
    assert memory.times_said == 3 and memory.last_said_at == T0 + timedelta(minutes=5)  # its reply's time
    assert memory.source_message_ids == ["m0", "m1", "m2", "m3", "m4", "m5"]
    # Its messages are the memory's: the export keeps them, and "Forget this" on a repeat forgets it.
    lines = [json.loads(line) for line in await MemoryExport(sessionmaker).export_lines(user_id="u1")]
    assert [line["id"] for line in lines] == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert await service.forget_message(message_id="m4", channel_id=None, user_id="u1") == 1


async def test_what_differs_in_a_fact_a_negation_or_its_subject_is_no_repeat(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    pairs = [
        ("Biscuit is 4 years old.", "Biscuit is 5 years old."),
        ("I drink green tea every morning.", "I don't drink green tea any more."),
        ("Let me tell you about the weather.", "Let me tell you about my garden."),
        ("I grow tomatoes and basil in my garden.", "I made pesto with the basil from my garden."),
        # Their rarest word is the same ("practised"), and "Week 2" is no key fact: what they are about
        # differs.
        ("Week 2: I practised fencing on Saturday.", "Week 7: I practised karate on Saturday."),
    ]
    await add_chat(sessionmaker, p, said(*(text for pair in pairs for text in pair)))
    report = await service.form_pending()
    assert (report.memories, report.repeats) == (10, 0)
    assert all(m.times_said == 1 for m in await memories(sessionmaker))


async def test_a_repeat_said_elsewhere_is_a_memory_of_its_own_never_recalled_beside_the_first(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    await add_chat(sessionmaker, p, said("My sister Leila lives in Porto."))
    await add_chat(
        sessionmaker,
        p,
        said("Leila, my sister, is living in Porto."),
        guild_id="g1",
        channel_id="c1",
        prefix="g",
    )
    await service.form_pending()
    # Said at the same minutes in both venues: the DM's came first in the log.
    second, first = sorted(await memories(sessionmaker), key=lambda m: m.source_message_ids[0])
    # Each venue keeps its memory (a guild's recall sees only its own); the later is marked a repeat.
    assert second.repeat_of == first.id and first.repeat_of is None
    assert first.times_said == 2 and second.times_said == 1
    found = await service.recall(personality_id=p.id, user_id="u1", query="Where does my sister Leila live?")
    assert [m.id for m in found if m.id in (first.id, second.id)] in ([first.id], [second.id])
    in_guild = await service.recall(
        personality_id=p.id, user_id="u1", query="Where does my sister Leila live?", guild_id="g1"
    )
    assert second.id in {m.id for m in in_guild}
