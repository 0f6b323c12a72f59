"""The fusion of the two sides of a search, the context that comes with the best memories, and the
dense query without the participants' names (more end-to-end recall in tests/memory/service/)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.llm import LLMClient
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import Candidates
from memory.recall.neighbours import with_context
from memory.recall.query import ParticipantNames, dense_query, names_of
from memory.recall.ranking import (
    DENSE_WEIGHT,
    EQUAL_SCORES,
    FOUND_FLOOR,
    by_score,
    fuse,
    one_of_each,
    pins_first,
    restatements_last,
)
from memory.recall.recalled import StoredMemory
from memory.service import MemoryService
from memory.types import ScoredId
from models import Message, Personality
from testkit.memory_service import T0, add_chat, add_personality, make_service, memories

A, B, C, D = (uuid.UUID(int=i) for i in range(1, 5))


def read(
    memory_id: uuid.UUID,
    *,
    pinned: bool = False,
    content: str = "",
    repeat_of: uuid.UUID | None = None,
    times_said: int = 1,
    days_ago: int = 0,
) -> StoredMemory:
    at = T0 - timedelta(days=days_ago)
    return StoredMemory(
        memory_id, content, None, [], at, False, "verbatim", pinned, None, times_said, repeat_of, None
    )


def test_fuse_blends_min_max_normalised_scores_with_the_keyword_side_weighing_more() -> None:
    found = Candidates(
        dense=[ScoredId(A, 0.9), ScoredId(B, 0.7), ScoredId(C, 0.5)],
        keyword=[ScoredId(C, 12.0), ScoredId(D, 4.0), ScoredId(A, 2.0)],
    )
    fused = fuse(found)
    # The last of a side still gets FOUND_FLOOR of it: found is not nothing.
    assert fused[A] == pytest.approx(DENSE_WEIGHT * 1.0 + (1 - DENSE_WEIGHT) * FOUND_FLOOR)
    assert fused[B] == pytest.approx(DENSE_WEIGHT * 0.5)
    assert fused[C] == pytest.approx(DENSE_WEIGHT * FOUND_FLOOR + (1 - DENSE_WEIGHT) * 1.0)
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
    assert only_dense == {A: pytest.approx(DENSE_WEIGHT), B: pytest.approx(DENSE_WEIGHT * FOUND_FLOOR)}
    # A single hit, or equal scores, normalise to 1: nothing to tell apart on that side.
    assert fuse(Candidates(dense=[], keyword=[ScoredId(C, 3.0)])) == {C: pytest.approx(1 - DENSE_WEIGHT)}
    assert fuse(Candidates(dense=[], keyword=[])) == {}
    assert fuse(Candidates(dense=[ScoredId(A, 1.0)], keyword=[ScoredId(A, 1.0)]), dense_weight=0.5) == {
        A: pytest.approx(1.0)
    }


def test_pins_first_moves_only_the_pins_the_query_is_about() -> None:
    ranked = [read(A), read(B, pinned=True), read(C, pinned=True), read(D)]
    # C is pinned but the query is not about it: it keeps its rank; B goes first.
    assert [m.id for m in pins_first(ranked, {A, B, D})] == [B, A, C, D]
    assert [m.id for m in pins_first(ranked, {A, B, C})] == [B, C, A, D]
    assert [m.id for m in pins_first(ranked, set())] == [A, B, C, D]


def test_among_equal_scores_the_memory_said_more_often_comes_first_then_the_newer() -> None:
    memories = [read(A, days_ago=1), read(B, times_said=3, days_ago=9), read(C, days_ago=2), read(D)]
    # A and B score as equals (within EQUAL_SCORES); C is clearly below; D clearly above.
    scores = {A: 0.5, B: 0.5 - EQUAL_SCORES / 4, C: 0.45, D: 0.6}
    assert [m.id for m in by_score(memories, scores)] == [D, B, A, C]
    # Said as often: the newer first.
    assert [m.id for m in by_score(memories[:1] + memories[2:3], {A: 0.5, C: 0.5})] == [A, C]


def test_an_answer_holds_one_memory_of_each_group_saying_the_same() -> None:
    ranked = [
        read(A, content="Alice: my sister lives in Porto"),
        read(B, content="Alice: I run on Saturdays"),
        read(C, content="Alice: Leila, my sister, lives in Porto", repeat_of=A),
        read(D, content=" alice:  I run on SATURDAYS"),  # the same words
    ]
    assert [m.id for m in one_of_each(ranked)] == [A, B]
    # The better ranked of a group stays, whichever came first.
    assert [m.id for m in one_of_each([ranked[2], ranked[0]])] == [C]


def test_dense_query_leaves_out_the_participants_names() -> None:
    names = {"Melanie", "Jon", "Ana Lima"}
    assert (
        dense_query("What activities does Melanie partake in?", names) == "What activities does partake in?"
    )
    assert (
        dense_query("Which cities has Jon visited? Jon's trips too", names)
        == "Which cities has visited? trips too"
    )
    # A full name, or its first word; whole words only, as written.
    assert dense_query("Did Ana Lima or Ana call Jonathan?", names) == "Did or call Jonathan?"
    assert dense_query("what did jon say?", names) == "what did jon say?"
    # Nothing but names: searched as given. No names known: as given.
    assert dense_query("Melanie?", names) == "Melanie?"
    assert dense_query("Where has Melanie camped?", set()) == "Where has Melanie camped?"


def memory(n: int, words: int) -> StoredMemory:
    return read(uuid.UUID(int=100 + n), content=" ".join(["w"] * words))


def test_with_context_attaches_neighbours_to_the_best_hits_while_the_words_fit() -> None:
    h1, h2, h3, h4 = (memory(i, 10) for i in range(4))
    before1, after1, after2, before4 = memory(10, 5), memory(11, 30), memory(12, 5), memory(13, 1)
    around = {
        h1.id: (before1, after1),
        h2.id: (h1, after2),  # h1 is a hit itself: never context as well
        h3.id: (None, after2),  # already came with h2: once only
        h4.id: (before4, None),
    }
    # Budget 50: the hits take 40; before1 fits (45), after1 would not (75), after2 does (50).
    out = with_context([h1, h2, h3, h4], around, budget=50)
    assert [(hit.id, context) for hit, context in out] == [
        (h1.id, (before1, None)),
        (h2.id, (None, after2)),
        (h3.id, (None, None)),
        (h4.id, (None, None)),
    ]
    # A bigger budget: everything that is not a hit or taken comes, best hit first.
    roomy = with_context([h1, h2, h3, h4], around, budget=1000)
    assert [context for _, context in roomy] == [
        (before1, after1),
        (None, after2),
        (None, None),
        (before4, None),
    ]
    # The hits are never cut, whatever the budget.
    assert [hit.id for hit, _ in with_context([h1, h2], {}, budget=0)] == [h1.id, h2.id]


TOPICS = ["the weather", "my garden", "Zephyrine's wedding", "the dress I wore", "the cake", "my commute"]


def test_a_hit_restating_one_above_it_in_the_same_names_and_numbers_goes_after_the_others() -> None:
    close, also_close, far = [1.0, 0.0, 0.0], [0.9, 0.43, 0.0], [0.0, 0.0, 1.0]
    E, F = uuid.UUID(int=5), uuid.UUID(int=6)
    ranked = [
        read(A, content="Alice: I was born on May 12th.\nSage: Noted!"),
        read(B, content="Alice: My birthday is on 12 May.\nSage: Lovely!"),  # says A again
        read(C, content="Alice: My rent is 950 pounds.\nSage: Noted!"),
        read(D, content="Alice: My grandma turns 91 on 12 May."),  # other numbers
        read(E, content="Alice: I practised fencing.\nSage: Noted!"),  # no names, no numbers
        read(F, content="Alice: I practised karate.\nSage: Noted!"),
    ]
    vectors = {A: close, B: also_close, C: far, D: also_close, E: [0.0, 1.0, 0.0], F: [0.0, 1.0, 0.0]}

    assert [m.id for m in restatements_last(ranked, vectors)] == [A, C, D, E, F, B]
    # Far apart in meaning, the same facts are not a restatement; nor one name alone ("Alice" is a
    # participant's anyway); a pin keeps its place; a memory the index has no vector of too.
    assert [m.id for m in restatements_last(ranked[:2], {A: close, B: far})] == [A, B]
    named = [read(A, content="Alice: LGBTQ art show"), read(B, content="Alice: the LGBTQ group")]
    assert [m.id for m in restatements_last(named, {A: close, B: close}, ["Alice"])] == [A, B]
    # A name starting its sentence is no fact there, but the other's facts are among its words.
    nora = [
        read(A, content="Alice: My sister Nora works at Google."),
        read(B, content="Alice: Nora works at Google."),
    ]
    assert [m.id for m in restatements_last([*nora, ranked[2]], {A: close, B: close, C: far})] == [A, C, B]
    pinned = [ranked[0], dataclasses.replace(ranked[1], pinned=True), ranked[2]]
    assert [m.id for m in restatements_last(pinned, vectors)] == [A, B, C]
    assert [m.id for m in restatements_last(ranked[:3], {A: close})] == [A, B, C]


async def test_recall_leaves_out_a_restatement_in_other_words_and_keeps_what_says_something_else(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    said = ["I was born on May 12th.", "My birthday is on 12 May.", "May is my favourite month for a party."]
    for n, line in enumerate(said):
        await add_chat(sessionmaker, p, [("user", line), ("assistant", "Noted!")], prefix=f"s{n}-")
    await service.form_pending()
    rows = {m.content.split("\n")[0].removeprefix("Alice: "): m.id for m in await memories(sessionmaker)}
    assert len(rows) == 3  # formation kept both wordings: "born" is not "birthday"

    found = await service.recall(personality_id=p.id, user_id="u1", query="When is my birthday?", limit=3)

    order = [m.id for m in found]
    assert set(order[:2]) == {rows[said[0]], rows[said[2]]} or set(order[:2]) == {
        rows[said[1]],
        rows[said[2]],
    }
    assert len(order) == 2  # the other wording: a near-duplicate (memory.recall.near_duplicates)


async def test_the_best_memories_come_with_the_exchanges_around_them(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Lilith")
    turns = [
        turn
        for topic in TOPICS
        for turn in (("user", f"Let me tell you about {topic}"), ("assistant", "Go on"))
    ]
    await add_chat(sessionmaker, p, turns, guild_id="g1", channel_id="c1")
    # Bob talks in the same channel, between Alice's exchanges in time: never Alice's neighbour.
    await add_chat(
        sessionmaker,
        p,
        [("user", "Zephyrine's wedding was lovely"), ("assistant", "Indeed")],
        user_id="u2",
        user_name="Bob",
        guild_id="g1",
        channel_id="c1",
        prefix="b",
        start=5,
    )
    # An imported history may give a whole session one timestamp: the log's order still tells.
    async with sessionmaker.begin() as session:
        await session.execute(update(Message).values(created_at=T0))
    await service.form_pending()
    alice = {
        m.content.split("about ")[1].split("\n")[0]: m
        for m in await memories(sessionmaker)
        if m.user_id == "u1"
    }

    [best] = await service.recall(
        personality_id=p.id, user_id="u1", query="Zephyrine wedding", guild_id="g1", limit=1
    )
    garden, wedding, dress = (alice[t] for t in ("my garden", "Zephyrine's wedding", "the dress I wore"))
    assert best.id == wedding.id and [m.id for m in best.context] == [garden.id, dress.id]
    # Its own text, messages, score and date; its context beside them, in conversation order, and
    # after its own words for a prompt.
    assert best.content == wedding.content and best.source_message_ids == ["m4", "m5"]
    assert [m.content for m in best.context] == [garden.content, dress.content]
    assert best.text_with_context == "\n".join(m.content for m in (wedding, garden, dress))
    assert best.sources_with_context == ["m4", "m5", "m2", "m3", "m6", "m7"]
    assert best.occurred_at == wedding.occurred_at and best.content_verbatim == wedding.content_verbatim

    # A neighbour recalled as a hit itself does not come again as context; each comes once, with the
    # best hit it is next to.
    found = await service.recall(
        personality_id=p.id, user_id="u1", query="Zephyrine wedding, the dress I wore", guild_id="g1", limit=2
    )
    assert {m.id for m in found} == {wedding.id, dress.id}
    by_hit = {m.id: [c.id for c in m.context] for m in found}
    assert by_hit == {wedding.id: [garden.id], dress.id: [alice["the cake"].id]}

    # A forgotten memory is never a neighbour: the next one before it takes its place.
    await service.forget(user_id="u1", memory_ids=[garden.id])
    [best] = await service.recall(
        personality_id=p.id, user_id="u1", query="Zephyrine wedding", guild_id="g1", limit=1
    )
    assert [m.id for m in best.context] == [alice["the weather"].id, dress.id]
    assert "garden" not in best.text_with_context
    bob = await service.recall(
        personality_id=p.id, user_id="u2", query="Zephyrine wedding", guild_id="g1", limit=3
    )
    assert [(m.source_message_ids, m.context) for m in bob] == [(["b5", "b6"], ())]


async def test_the_participants_are_the_personality_and_the_names_the_user_spoke_under(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Lilith", display_name="Lady Lilith")
    await add_chat(sessionmaker, p, [("user", "I planted tulips"), ("assistant", "Lovely")])
    await add_chat(sessionmaker, p, [("user", "Hi"), ("assistant", "Hello")], user_id="u2", user_name="Bob")
    await service.form_pending()

    async def names(personality_id: int, user_id: str) -> frozenset[str]:
        async with sessionmaker() as session:
            return frozenset(n for n in await session.scalars(names_of(personality_id, user_id)) if n)

    assert await names(p.id, "u1") == {"Lady Lilith", "Alice"}
    assert await names(p.id, "u2") == {"Lady Lilith", "Bob"}
    assert await names(p.id, "nobody") == {"Lady Lilith"}
    # StoredMemory once, then kept: a rename shows after NAMES_TTL (the old name is left out meanwhile).
    participants = ParticipantNames()
    assert participants.kept(p.id, "u1") is None
    participants.keep(p.id, "u1", await names(p.id, "u1"))
    async with sessionmaker.begin() as session:
        await session.execute(update(Personality).where(Personality.id == p.id).values(display_name="Lili"))
    assert participants.kept(p.id, "u1") == frozenset({"Lady Lilith", "Alice"})
    assert participants.kept(p.id, "u2") is None
    assert await names(p.id, "u1") == {"Lili", "Alice"}
    # A question naming them finds what the same question without the names finds.
    for query in ("Lili, what did Alice plant?", "what did I plant?"):
        [found] = await service.recall(personality_id=p.id, user_id="u1", query=query, limit=1)
        assert "tulips" in found.content


class RecordingEmbedder:
    """The real embedder, recording the texts it is asked to embed."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self.model_name = embedder.model_name
        self.dimension = embedder.dimension
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await self._embedder.embed(texts)


async def test_the_query_is_embedded_without_the_names_once_they_are_read(
    sessionmaker: async_sessionmaker[AsyncSession], embedder: Embedder, tmp_path: Path
) -> None:
    recording = RecordingEmbedder(embedder)
    index = EdgeVectorIndex(tmp_path / "qdrant")
    service = make_service(sessionmaker, index, recording, LLMClient(), None)
    try:
        p = await add_personality(sessionmaker, "Lilith", display_name="Lady Lilith")
        await add_chat(sessionmaker, p, [("user", "I planted tulips"), ("assistant", "Lovely")])
        await service.form_pending()
        names = {"Lady Lilith", "Alice"}

        async def embedded(query: str) -> list[str]:
            recording.texts.clear()
            [found] = await service.recall(personality_id=p.id, user_id="u1", query=query, limit=1)
            assert "tulips" in found.content
            return recording.texts

        # The names are not known yet: the query is embedded as given while they are read, then
        # again without them since it names one.
        naming = "Alice here, what did I plant?"
        assert dense_query(naming, names) == "here, what did I plant?"
        assert await embedded(naming) == [naming, "here, what did I plant?"]
        # Kept from then on: one embedding, without the names.
        assert await embedded("what did I plant, Lady Lilith?") == ["what did I plant, ?"]
        assert await embedded("what did I plant?") == ["what did I plant?"]
    finally:
        await index.close()
