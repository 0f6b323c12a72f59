"""A claim's numbers and times are its own however they are written: a forgotten "at 6am" said again as
"at six every morning" is the claim, and a correction of "6am" retires the memories that say "six";
"6pm" is not "6am". Real PostgreSQL, Qdrant Edge, the local embedder (MemoryService as
testkit.memory_service builds it)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from testkit.memory_service import add_personality, memories
from tests.memory.formation.test_forgotten_claims import live, say


async def test_a_forgotten_time_said_again_in_words_is_superseded(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    [claim] = await say(
        sessionmaker, service, p, ["Mr. Okafor next door plays the trumpet at 6am."], prefix="a"
    )
    assert await service.forget(user_id="u1", memory_ids=[claim.id]) == 1
    paraphrase = "My neighbour Mr. Okafor practises his trumpet at six every morning."
    assert live(await say(sessionmaker, service, p, [paraphrase], prefix="b")) == []
    # Another time of his is another claim.
    evening = "Mr. Okafor next door plays the trumpet at 6pm."
    assert len(live(await say(sessionmaker, service, p, [evening], prefix="c"))) == 1


async def test_a_corrected_time_retires_the_memories_that_spell_it_in_words(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    claim, in_words, evening = await say(
        sessionmaker,
        service,
        p,
        [
            "My cat Pistachio gets her breakfast at 6am.",
            "Pistachio wakes me at six for her breakfast, every single day.",
            "Pistachio gets her dinner at 6pm.",
        ],
        prefix="a",
    )
    await service.correct(
        user_id="u1", memory_id=claim.id, content="My cat Pistachio gets her breakfast at 7am."
    )
    by_id = {m.id: m for m in await memories(sessionmaker)}
    assert by_id[in_words.id].superseded_at is not None
    assert by_id[evening.id].superseded_at is None
