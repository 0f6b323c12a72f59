"""Near-duplicates left out of recall's answer (memory.recall.near_duplicates, issue 31)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.near_duplicates import without_near_duplicates
from memory.recall.question import read_question
from memory.recall.relevance import MemoryWords
from memory.service import MemoryService
from testkit.memory_service import add_chat, add_personality, memories
from tests.memory.recall.test_search import read

A, B, C, D, E = (uuid.UUID(int=i) for i in range(1, 6))
CLOSE, ALSO_CLOSE, FAR = [1.0, 0.0, 0.0], [0.9, 0.43, 0.0], [0.0, 0.0, 1.0]


def _kept(lines: dict[uuid.UUID, str], vectors: dict[uuid.UUID, list[float]], query: str) -> list[uuid.UUID]:
    ranked = [read(i, content=f"Alice: {line}\nSage: Noted!") for i, line in lines.items()]
    words = {i: MemoryWords.of(line, "Noted!") for i, line in lines.items()}
    return [m.id for m in without_near_duplicates(ranked, vectors, words, read_question(query, ["Alice"]))]


def test_a_paraphrase_of_a_memory_above_it_is_left_out_unless_it_adds_something() -> None:
    lines = {
        A: "I ride my bike to work.",
        B: "I cycle to work every day.",  # A in other words: left out
        C: "I cycle to Boots every day.",  # a name A does not hold
        D: "I don't ride my bike to work any more.",  # a negation A does not share
        E: "The weather was nice.",  # far in meaning
    }
    vectors = {A: CLOSE, B: ALSO_CLOSE, C: ALSO_CLOSE, D: ALSO_CLOSE, E: FAR}
    assert _kept(lines, vectors, "How do I get to work?") == [A, C, D, E]
    # Far apart, or without a vector in the index, a paraphrase stays.
    assert _kept(lines, {A: CLOSE, B: FAR}, "How do I get to work?") == [A, B, C, D, E]
    assert _kept({A: lines[A], B: lines[B]}, {A: CLOSE}, "How do I get to work?") == [A, B]


def test_the_same_number_or_names_let_a_less_close_paraphrase_go() -> None:
    somewhat_close = [0.77, 0.638, 0.0]
    rent = {A: "I pay 950 a month in rent.", B: "Rent on my flat is 950 pounds."}
    assert _kept(rent, {A: CLOSE, B: somewhat_close}, "How much is my rent?") == [A]
    commute = {A: "I ride my bike to work.", B: "I cycle to work every day."}
    assert _kept(commute, {A: CLOSE, B: somewhat_close}, "How do I get to work?") == [A, B]
    # One name alone tells nothing apart: a topic many memories share.
    lisbon = {A: "I love the trams in Lisbon.", B: "The old maps of Lisbon are pretty."}
    assert _kept(lisbon, {A: CLOSE, B: somewhat_close}, "What about Lisbon?") == [A, B]


def test_a_close_memory_holding_a_word_of_the_question_the_ones_above_lack_stays() -> None:
    lines = {A: "Every morning I have green tea.", B: "I switched to coffee, that's my drink now."}
    # Close in meaning, no name or negation of its own, but it holds "drink": it may be the answer.
    assert _kept(lines, {A: CLOSE, B: ALSO_CLOSE}, "What do I drink in the morning?") == [A, B]
    assert _kept(lines, {A: CLOSE, B: ALSO_CLOSE}, "What do I have in the morning?") == [A]


def test_a_pinned_memory_always_stays() -> None:
    ranked = [
        read(A, content="Alice: I ride my bike to work."),
        read(B, content="Alice: I cycle to work.", pinned=True),
    ]
    words = {A: MemoryWords.of("I ride my bike to work.", ""), B: MemoryWords.of("I cycle to work.", "")}
    question = read_question("How do I get to work?", ["Alice"])
    kept = without_near_duplicates(ranked, {A: CLOSE, B: CLOSE}, words, question)
    assert [m.id for m in kept] == [A, B]


async def test_recall_returns_one_of_two_wordings_formation_kept_apart(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    said = [
        ("I ride my bike to work.", "Wow, that's quite something."),
        ("I cycle to work every day.", "Ha, I can picture it."),
        ("I don't ride my bike to work any more, I take the bus.", "Noted!"),
        ("I work at Boots as a pharmacist.", "Noted!"),
    ]
    for n, (line, reply) in enumerate(said):
        await add_chat(sessionmaker, p, [("user", line), ("assistant", reply)], prefix=f"s{n}-", start=2 * n)
    await service.form_pending()
    rows = {m.content.split("\n")[0].removeprefix("Alice: "): m.id for m in await memories(sessionmaker)}
    assert len(rows) == 4  # formation keeps both wordings: "bike" is not "cycle"

    found = [
        m.id
        for m in await service.recall(
            personality_id=p.id, user_id="u1", query="How do I get to work?", limit=5
        )
    ]
    wordings = {rows[said[0][0]], rows[said[1][0]]}
    assert len(wordings.intersection(found)) == 1
    # The change and the other memory are no near-duplicates: both come.
    assert {rows[said[2][0]], rows[said[3][0]]} <= set(found)
