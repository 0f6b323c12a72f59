"""Recall answers the question asked: the issue's cases through import and recall, the relevance
floor, and the user's own lines preferred in a question about them."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.owners.personalities import PersonalityService
from memory.recall.keywords import OWN_LINES_BIT, encode_sparse_query
from memory.service import MemoryService
from memory.transfer.sillytavern import parse_sillytavern
from memory.transfer.transcript import read_transcript
from memory.types import MemoryMode, RecallFilter, SparseVector
from memory.wiring import MemoryServices
from testkit.memory_service import add_chat, add_personality

ROOT = Path(__file__).resolve().parents[3]
ROLEPLAY = ROOT / "bench" / "data" / "seraphina_sillytavern.jsonl"  # a SillyTavern chat, user Kael
SAGE = ROOT / "examples" / "sage.jsonl"
EVAL = ROOT / "bench" / "data" / "eval_conversations.jsonl"  # three users with Mira
UNRELATED = (
    "quantum chromodynamics lecture",
    "the boiling point of mercury",
    "what is the capital of Mongolia",
)


async def imported(
    sessionmaker: async_sessionmaker[AsyncSession], services: MemoryServices, name: str, mode: MemoryMode
) -> int:
    """Both chats, as `personae import` reads them, for a personality of `mode`; its id."""
    personality, _ = await PersonalityService(sessionmaker).create(name, memory_mode=mode)
    roleplay = parse_sillytavern(ROLEPLAY.read_text(encoding="utf-8"))
    sage, skipped = read_transcript(SAGE)
    for lines, user, skip in ((roleplay.lines, "kael", roleplay.skipped), (sage, None, skipped)):
        await services.transfer.import_transcript(
            lines, personality=personality, default_user_id=user, skipped_lines=skip, mode=mode
        )
    return personality.id


@pytest.mark.parametrize("mode", [MemoryMode.VERBATIM, MemoryMode.SUMMARIZED])
async def test_the_issues_questions_find_their_memory_first(
    sessionmaker: async_sessionmaker[AsyncSession],
    service: MemoryService,
    services: MemoryServices,
    mode: MemoryMode,
) -> None:
    personality_id = await imported(sessionmaker, services, f"seraphina-{mode.value}", mode)

    said = [line.id for line in parse_sillytavern(ROLEPLAY.read_text(encoding="utf-8")).lines]

    async def first(user: str, query: str) -> str:
        found = await service.recall(personality_id=personality_id, user_id=user, query=query, limit=5)
        return found[0].source_message_ids[0]

    # "I'm trying to get to Thornwick to find my sister, Mira. She's a cartographer...", against
    # "I also owe someone: 14 silver coins to Doran", said the next morning.
    assert await first("kael", "What is my sister's name and what does she do?") == said[4]
    assert await first("kael", "Who is my sister?") == said[4]
    # "Wolves. Three of them jumped me on the ridge trail at dusk."
    assert await first("kael", "How many wolves attacked me?") == said[0]
    # "Guess whose grandmother turned 90 yesterday", against the tomatoes planted beside "a sweet
    # old man named Harold".
    assert await first("1001", "How old is my grandmother?") == "sage-001"


async def test_an_unrelated_question_recalls_nothing_and_a_related_one_its_memory(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, services: MemoryServices
) -> None:
    personality_id = await imported(sessionmaker, services, "seraphina", MemoryMode.VERBATIM)
    for user in ("kael", "1001", "1002"):
        for query in UNRELATED:
            assert await service.recall(personality_id=personality_id, user_id=user, query=query) == [], query
    related = {
        ("kael", "Where did we find Ember?"): "EMBER!",
        ("kael", "Doran"): "Doran",
        ("1002", "what is my bonsai called"): "Gerald",
        ("1001", "Plot #17"): "Plot #17",
    }
    for (user, query), said in related.items():
        found = await service.recall(personality_id=personality_id, user_id=user, query=query, limit=3)
        assert any(said in m.content for m in found), query


async def test_a_question_about_the_user_prefers_what_they_said_themselves(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    turns = [
        ("user", "Tell me about your family"),
        ("assistant", "My sister Morgana keeps bees on a hill; her honey is famous in three valleys."),
        ("user", "My sister Ines just moved to Lyon for work."),
        ("assistant", "Lyon! Good food there."),
    ]
    await add_chat(sessionmaker, p, turns)
    await service.form_pending()
    [first, *_] = await service.recall(personality_id=p.id, user_id="u1", query="where does my sister live?")
    assert "Ines" in first.content
    # What the user said is keyed in a space of its own; the personality's words are not.
    index = service._store.index
    own = [t | OWN_LINES_BIT for t in encode_sparse_query("Ines").indices]
    theirs = [t | OWN_LINES_BIT for t in encode_sparse_query("Morgana").indices]
    flt = RecallFilter(personality_id=p.id, user_id="u1")
    search = index.search
    assert (await search(dense=None, sparse=_vector(own), flt=flt, limit=5)).keyword
    assert not (await search(dense=None, sparse=_vector(theirs), flt=flt, limit=5)).keyword


def _vector(indices: list[int]) -> SparseVector:
    return SparseVector(indices=indices, values=[1.0] * len(indices))


async def imported_eval(sessionmaker: async_sessionmaker[AsyncSession], services: MemoryServices) -> int:
    """bench.recall_questions' eval chat (three users with Mira), verbatim; the personality's id."""
    personality, _ = await PersonalityService(sessionmaker).create(
        "mira", display_name="Mira", memory_mode=MemoryMode.VERBATIM
    )
    lines, skipped = read_transcript(EVAL)
    await services.transfer.import_transcript(
        lines,
        personality=personality,
        default_user_id=None,
        skipped_lines=skipped,
    )
    return personality.id


async def test_a_question_about_the_user_finds_what_they_said_in_other_words(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, services: MemoryServices
) -> None:
    # The user asks in their own paraphrase: "herb" for "cilantro", "make" for "a raise ... a month".
    personality_id = await imported_eval(sessionmaker, services)

    async def first(query: str) -> list[str]:
        found = await service.recall(personality_id=personality_id, user_id="u1", query=query, limit=5)
        return found[0].source_message_ids

    # "also I hate cilantro. tastes like soap", against "I have to stand on one foot".
    assert "e-0131" in await first("which herb can't I stand")
    # "they finally gave me a raise!!! $3,450 a month", against "I'm a sound engineer at Lowtide".
    assert "e-0041" in await first("how much do I make per month")


async def test_the_memory_holding_the_noun_asked_about_comes_first(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService, services: MemoryServices
) -> None:
    personality_id = await imported_eval(sessionmaker, services)
    found = await service.recall(
        personality_id=personality_id, user_id="u2", query="what's my sister's address", limit=5
    )
    # "Leila sent me her address ... Rua das Flores 88", against "my sister Leila lives in Porto".
    assert "Rua das Flores" in found[0].content


async def test_a_list_of_keywords_finds_a_memory_holding_any_one_of_them(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    """ "PIN cat tea" searches for each word: a memory holding one of the three is about it (a third of
    the query's words, and a low cosine with all three, fell under the relevance floor)."""
    p = await add_personality(sessionmaker, "Nova")
    turns = [
        ("user", "Nova, my PIN is 8812 ALICEPIN"),
        ("assistant", "Nova here. You said: “Nova, my PIN is 8812 ALICEPIN”. I remember: my bike lock code"),
        ("user", "Nova, my cat is called ALICECAT Mochi"),
        ("assistant", "Nova here. You said: “Nova, my cat is called ALICECAT Mochi”. I remember: my sister"),
    ]
    await add_chat(sessionmaker, p, turns)
    await service.form_pending()
    found = await service.recall(personality_id=p.id, user_id="u1", query="PIN cat tea")
    assert any("ALICEPIN" in m.content for m in found) and any("ALICECAT" in m.content for m in found)
    assert (
        await service.recall(personality_id=p.id, user_id="u1", query="quantum chromodynamics lecture") == []
    )
