"""How recall orders what it found: the two sides' scores fused (`fuse`), best first with ties broken
(`by_score`), one memory of each group of repeats (`one_of_each`), restatements after what they
restate (`restatements_last`), the pins the query is about first (`pins_first`)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from memory.recall.index import Candidates
from memory.recall.recalled import StoredMemory

# The dense side's share of a fused score, the keyword side's the rest. With a small local embedder
# the keyword side is the stronger one (with the analyzer and the date and previous-line keying);
# 0.2 to 0.4 measured alike, equal weights clearly worse.
DENSE_WEIGHT = 0.3
# The dense side's share for a question about the user ("my horse", "what do I drive"): they ask
# in their own paraphrase of what they said ("horse" for "gelding", "pet" for "tortoise"), and their
# question's content words are few. bench.recall_questions direct first, verbatim / summarized: 83.6 /
# 82.9% at 0.3, 85.7 / 85.0% at 0.4 to 0.5, 85.0% at 0.6; LoCoMo's questions are in the third person.
ABOUT_USER_DENSE_WEIGHT = 0.5
# The least a side gives a memory it found (min-max would give its last 0): a score of 0 means found
# by neither, never relevant (memory.recall.relevance).
FOUND_FLOOR = 0.01
# Fused scores this close are equals: the memory said more often goes first, then the more recent.
EQUAL_SCORES = 0.01
# A hit restates one ranked above it, and goes after every hit that does not (demoted, not dropped:
# the test is a guess), when their stored embeddings (the whole exchange) are this close and they hold
# the same names and numbers, enough to tell a memory apart (`facts_of`, `telling`): "I pay 950 a month
# in rent" / "My rent is 950 pounds a month". Closeness alone is no test: "a walk, it was rainy" and
# "... warm" score 0.93, "I practised fencing" / "... karate" 0.74, "I ride my bike to work" /
# "Cycling is how I commute" as low as 0.75. bench.repeats: near-duplicates in the top 10 13.5% ->
# 11.7%; at 0.6, LoCoMo dev r@10 verbatim 85.6 -> 84.7 (one name in common, "LGBTQ", was a fact then).
# On 14 pairs written apart from the benches: 6 of 6 restatements joined, 1 of 8 others ("Grandpa
# Joe is 88" / "... lives at number 88").
SAME_FACTS_CLOSENESS = 0.8


def fuse(candidates: Candidates, *, dense_weight: float = DENSE_WEIGHT) -> dict[uuid.UUID, float]:
    """Each side's scores min-max normalised to [FOUND_FLOOR, 1], then weighted and summed (absent = 0).

    A blend of scores rather than of ranks: the weaker side cannot lift its long tail over what the
    stronger side found clearly, and a memory both sides found scores highest. In [0, 1].
    """
    fused: dict[uuid.UUID, float] = {}
    for hits, weight in ((candidates.dense, dense_weight), (candidates.keyword, 1.0 - dense_weight)):
        if not hits:
            continue
        low, high = min(h.score for h in hits), max(h.score for h in hits)
        for hit in hits:
            normalised = 1.0 if high <= low else (hit.score - low) / (high - low)
            fused[hit.id] = fused.get(hit.id, 0.0) + weight * max(normalised, FOUND_FLOOR)
    return fused


def by_score(read: Sequence[StoredMemory], scores: Mapping[uuid.UUID, float]) -> list[StoredMemory]:
    """Best score first; scores within EQUAL_SCORES are equal: the memory said more often first,
    then the more recent."""
    return sorted(
        read,
        key=lambda m: (
            -round(scores.get(m.id, 0.0) / EQUAL_SCORES),
            -m.times_said,
            -m.occurred_at.timestamp(),
            m.id,
        ),
    )


def one_of_each(ranked: Sequence[StoredMemory]) -> list[StoredMemory]:
    """The memories in order, each but the first of a group saying the same thing left out: the
    repeats of one memory (`repeat_of`), or the same words."""
    seen: set[uuid.UUID | str] = set()
    kept = []
    for memory in ranked:
        same: set[uuid.UUID | str] = {
            memory.repeat_of or memory.id,
            " ".join(memory.content.casefold().split()),
        }
        if same.isdisjoint(seen):
            kept.append(memory)
        seen |= same
    return kept


# A stored vector as the index gives it (a list of floats) or as read into an array once.
Vectors = Mapping[uuid.UUID, Sequence[float] | np.ndarray]


def as_arrays(vectors: Mapping[uuid.UUID, Sequence[float]]) -> dict[uuid.UUID, np.ndarray]:
    """The vectors as rows of one float32 array: their Python floats read once (~0.3 ms for 20 of
    384), not by each step that compares them."""
    if not vectors:
        return {}
    return dict(zip(vectors, np.asarray(list(vectors.values()), dtype=np.float32), strict=True))


def closeness_matrix(
    ranked: Sequence[StoredMemory], vectors: Vectors
) -> tuple[dict[uuid.UUID, int], np.ndarray]:
    """Each memory's row (those with a stored vector) and the cosines of every pair, in one product."""
    rows = {memory.id: row for row, memory in enumerate(m for m in ranked if m.id in vectors)}
    if not rows:
        return rows, np.zeros((0, 0), dtype=np.float32)
    units = np.array([vectors[i] for i in rows], dtype=np.float32)
    units /= np.maximum(np.linalg.norm(units, axis=1, keepdims=True), 1e-12)
    return rows, units @ units.T


def restatements_last(
    ranked: Sequence[StoredMemory], vectors: Vectors, names: Collection[str] = ()
) -> list[StoredMemory]:
    """The memories in order, each that restates one kept above it moved after all the others (see
    SAME_FACTS_CLOSENESS); a pin keeps its place. The participants' `names` are in every memory, no
    facts of one. A memory's text is read only when one kept above it is that close."""
    spoken = {name.casefold() for name in names}
    rows, cosines = closeness_matrix(ranked, vectors)
    read: dict[int, tuple[frozenset[str], frozenset[str]]] = {}

    def facts_and_words(row: int, memory: StoredMemory) -> tuple[frozenset[str], frozenset[str]]:
        if row not in read:
            read[row] = (facts_of(memory.content) - spoken, vocabulary_of(memory.content))
        return read[row]

    kept: list[tuple[int, StoredMemory]] = []
    first, later = [], []
    for memory in ranked:
        row = rows.get(memory.id)
        if row is None or memory.pinned:
            first.append(memory)
            continue
        close = [(other, m) for other, m in kept if cosines[row, other] >= SAME_FACTS_CLOSENESS]
        if close and any(
            _restates(*facts_and_words(row, memory), *facts_and_words(other, m)) for other, m in close
        ):
            later.append(memory)
        else:
            first.append(memory)
            kept.append((row, memory))
    return first + later


def _restates(
    facts: frozenset[str], words: frozenset[str], other_facts: frozenset[str], other_words: frozenset[str]
) -> bool:
    """Each holds the other's facts among its words, telling ones between them (the two already
    SAME_FACTS_CLOSENESS close): "Nora, my sister, works at Google" holds those of "My sister Nora
    works at Google" though "Nora" starts a sentence there (no fact then)."""
    return telling(facts | other_facts) and facts <= other_words and other_facts <= words


def telling(facts: frozenset[str]) -> bool:
    """Whether these facts tell a memory apart: a number, or two names at least (one name alone is a
    topic many memories share: "LGBTQ", a nickname)."""
    return any(f.isdigit() for f in facts) or len(facts) >= 2


# A number (an ordinal as its number), or a capitalised word inside a sentence: a name, a month.
_FACT = re.compile(r"(\d+)(?:st|nd|rd|th)?\b|(?<=[\w,;] )([A-Z][\w'’-]*)")
_LABEL = re.compile(r"^[^\s:][^\n:]{0,39}?:[ \t]", re.MULTILINE)


def vocabulary_of(text: str) -> frozenset[str]:
    """A memory's words and numbers as `facts_of` spells them, its speakers' labels left out."""
    found = _WORD.findall(_LABEL.sub("", text))
    return frozenset(w.casefold().removesuffix("'s").removesuffix("’s") for w in found)


_WORD = re.compile(r"\d+|[^\W\d_][\w'’-]*")


def facts_of(text: str) -> frozenset[str]:
    """The names and numbers a memory's text holds, its speakers' labels left out."""
    found = (m.group(1) or m.group(2) for m in _FACT.finditer(_LABEL.sub("", text)))
    return frozenset(
        f.casefold().removesuffix("'s").removesuffix("’s") for f in found if f not in {"I", "I'm"}
    )


def pins_first(ranked: Sequence[StoredMemory], about: Collection[uuid.UUID]) -> list[StoredMemory]:
    """The pinned memories the query is `about` moved ahead, in their order; the rest after."""
    pins = [m for m in ranked if m.pinned and m.id in about]
    ahead = {m.id for m in pins}
    return pins + [m for m in ranked if m.id not in ahead]
