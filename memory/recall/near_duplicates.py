"""Near-duplicates left out of what recall returns: a memory that says again what one ranked above it
says, in other words, takes a slot of the answer and tells the prompt nothing new.

Formation merges a repeat only when it is sure (memory.formation.repeats: the same rare words both
ways), so paraphrases stay apart as rows: "I ride my bike to work" / "I cycle to work every day",
"It's raining again here" / "Another rainy day here". Recall may be bolder, as leaving one out of
one answer loses nothing stored: a hit is left out when its stored embedding (the whole exchange) is
NEAR_DUPLICATE_CLOSENESS or closer to one kept above it, holds that one's names and numbers, negates
what it negates ("I don't drink green tea any more" is news to "Every morning I have green tea"),
and adds nothing the memories kept above it lack: no name or number of its own, no word of the
question (it may be the answer they are not). "May is my favourite month" stays below "My birthday
is on 12 May": it does not hold the 12.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from functools import cache

from memory.recall.keywords import query_terms
from memory.recall.question import Question
from memory.recall.ranking import Vectors, closeness_matrix, facts_of, telling, vocabulary_of
from memory.recall.recalled import StoredMemory
from memory.recall.relevance import MemoryWords

# Set on bench.repeats (summarized): its paraphrase pairs score 0.79 to 0.89 as stored exchanges, while
# pairs saying two things score lower ("a walk, it was rainy" / "... warm" 0.79, "I practised fencing"
# / "... karate" 0.75) or differ by a name, a number or a negation, which keep them apart here.
NEAR_DUPLICATE_CLOSENESS = 0.8
# As close, when the two hold the same names and numbers, enough to tell a memory apart (a number, or
# two names: `telling`): "I pay 950 a month in rent" / "Rent on my flat is 950 pounds" (0.78), "I
# switched jobs, I'm at Lloyds Pharmacy now" / "I left Boots, I work at Lloyds Pharmacy now" (0.76).
SAME_FACTS_CLOSENESS = 0.75
# A negation and the word it bears on, past a few words that change nothing ("don't really like").
NEGATED = re.compile(
    r"\b(?:not|never|no longer|cannot|stopped|quit|\w+n[’']t)\s+"
    r"(?:(?:really|even|actually|ever|always|at|all|be|been|being|to|so|very|much|any|have|had)\s+)*"
    r"([^\W\d_][\w'’-]*)",
    re.IGNORECASE,
)


def without_near_duplicates(
    ranked: Sequence[StoredMemory],
    vectors: Vectors,
    words: Mapping[uuid.UUID, MemoryWords],
    question: Question,
    names: Collection[str] = (),
) -> list[StoredMemory]:
    """The memories in order, each near-duplicate of one kept above it left out (see the module
    docstring); a pin always stays. The participants' `names` are in every memory, no facts of one.
    Every pair's closeness comes from one product; a memory's text is read only when one kept above
    it is close enough to be said again, which few are."""
    spoken = {name.casefold() for name in names}
    rows, cosines = closeness_matrix(ranked, vectors)
    by_row = {row: memory for memory in ranked if (row := rows.get(memory.id)) is not None}
    held = cache(vocabulary_of)

    @cache
    def facts(row: int) -> frozenset[str]:
        return facts_of(by_row[row].content) - spoken

    @cache
    def negated(row: int) -> frozenset[int]:
        own = words.get(by_row[row].id)
        return _negated(own.users if own is not None else by_row[row].content)

    def restates(row: int, close: list[int], above: list[StoredMemory]) -> bool:
        # No name or number new to the memories above; one close one's held, its negations the same.
        if not facts(row) <= frozenset().union(*(held(m.content) for m in above)):
            return False
        return any(
            cosines[row, other] >= _closeness_for(facts(other))
            and negated(row) == negated(other)
            and facts(other) <= held(by_row[row].content)
            for other in close
        )

    kept: list[int] = []  # the rows kept, a pin's aside
    asked_held: set[int] = set()  # the question's terms the memories kept so far hold
    result: list[StoredMemory] = []
    for memory in ranked:
        own = words.get(memory.id)
        asked = set(question.content_terms).intersection(own.user_terms if own is not None else ())
        row = rows.get(memory.id)
        if row is not None and not memory.pinned:
            close = [other for other in kept if cosines[row, other] >= SAME_FACTS_CLOSENESS]
            if close and asked <= asked_held and restates(row, close, result):
                continue
            kept.append(row)
        asked_held |= asked
        result.append(memory)
    return result


def _closeness_for(facts: frozenset[str]) -> float:
    return SAME_FACTS_CLOSENESS if telling(facts) else NEAR_DUPLICATE_CLOSENESS


def _negated(text: str) -> frozenset[int]:
    return frozenset(term for word in NEGATED.findall(text) for term in query_terms(word))
