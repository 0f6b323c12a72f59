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
from dataclasses import dataclass

import numpy as np

from memory.recall.keywords import query_terms
from memory.recall.question import Question
from memory.recall.ranking import facts_of, telling, vocabulary_of
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


@dataclass(frozen=True, slots=True)
class _Kept:
    """A memory kept: its stored embedding (unit length), its names and numbers, what it negates."""

    unit: np.ndarray
    facts: frozenset[str]
    negated: frozenset[int]

    def restated_by(self, unit: np.ndarray, held: frozenset[str], negated: frozenset[int]) -> bool:
        """Whether a memory this close, holding these words, negating these, says it again: its
        names and numbers among the other's words, the same negations."""
        at_least = SAME_FACTS_CLOSENESS if telling(self.facts) else NEAR_DUPLICATE_CLOSENESS
        return float(unit @ self.unit) >= at_least and negated == self.negated and self.facts <= held


def without_near_duplicates(
    ranked: Sequence[StoredMemory],
    vectors: Mapping[uuid.UUID, Sequence[float]],
    words: Mapping[uuid.UUID, MemoryWords],
    question: Question,
    names: Collection[str] = (),
) -> list[StoredMemory]:
    """The memories in order, each near-duplicate of one kept above it left out (see the module
    docstring); a pin always stays. The participants' `names` are in every memory, no facts of one."""
    spoken = {name.casefold() for name in names}
    kept: list[_Kept] = []
    asked_held: set[int] = set()  # the question's terms the memories kept so far hold
    vocabulary: set[str] = set()  # their words and numbers
    result = []
    for memory in ranked:
        vector = vectors.get(memory.id)
        own = words.get(memory.id)
        negated = _negated(own.users if own is not None else memory.content)
        asked = set(question.content_terms).intersection(own.user_terms if own is not None else ())
        held = vocabulary_of(memory.content)
        if vector is not None and not memory.pinned:
            unit = np.asarray(vector, dtype=np.float32)
            unit /= float(np.linalg.norm(unit)) or 1.0
            facts = facts_of(memory.content) - spoken
            adds = not asked <= asked_held or not facts <= vocabulary
            if not adds and any(other.restated_by(unit, held, negated) for other in kept):
                continue
            kept.append(_Kept(unit, facts, negated))
        vocabulary |= held
        asked_held |= asked
        result.append(memory)
    return result


def _negated(text: str) -> frozenset[int]:
    return frozenset(term for word in NEGATED.findall(text) for term in query_terms(word))
