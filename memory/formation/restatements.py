"""When a text says again what another says: the one test behind forgotten claims and repeats (pure).

A statement is a text's meaning (its embedding), its key facts (memory.formation.fidelity: names,
numbers, dates, times), the words it holds and the words it negates. A later statement says an
earlier one again (`says_again`) when their meanings are close, the later holds every key fact of
the earlier (a name by any of its distinctive words: "a Civic" holds "Honda Civic"), and neither
negates a word the other affirms: "I'm not allergic to peanuts" corrects "I'm allergic to
peanuts", it does not restate it. Negations that affirm nothing the other says pass ("Sam hasn't
paid me back" restates "Sam owes me 500").

What a memory claims is its text on the user's side (`claim_text`): the personality's lines and the
speakers' labels left out, as the labels and a reply ("Noted!") would make any two exchanges look
alike to the embedder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.formation.fidelity import Facts, Vocabulary, key_facts, vocabulary, word_stem, zipf
from memory.formation.quantities import hour_numbers, hours_as_times
from memory.recall.keywords import encode_sparse_query

# Words rarer than this on wordfreq's Zipf scale (under about one in 100,000 words) are what a text is
# about: a repeat holds each of them. On the raw wordings of bench/data/repeats.json (290 ordered pairs
# saying one thing), 214 pass `says_again` at REPEAT_CLOSENESS with these anchors, none of the pairs
# saying two things (the corrections' unrelated lines and "I practised fencing"/"karate" among them);
# with the rarest word alone, "practised" made those two one.
RARE_ZIPF = 4.0
# Two words that share their first letters this many are one ("allergic", "allergy").
SHARED_PREFIX = 5
# `Name: text` at a line's start, as memories write exchanges (memory.formation.exchanges).
_LABEL = re.compile(r"^([^\s:][^\n:]{0,39}?):[ \t]")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
# A negation and the word it bears on, past a few words that change nothing ("don't really like").
_NEGATED = re.compile(
    r"\b(?:not|never|no longer|cannot|stopped|quit|\w+n[’']t)\s+"
    r"(?:(?:really|even|actually|ever|always|at|all|be|been|being|to|so|very|much|any|have|had)\s+)*"
    r"([^\W\d_][\w'’-]*)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Statement:
    """What a text says, for telling whether another says it again (see the module docstring).

    `held` is what it holds (fidelity's Vocabulary) for when it is the later text; a stored
    forgotten claim is only ever the earlier one and keeps none. `vector` is None when the cosine
    comes from elsewhere (the index's score of a stored memory).
    """

    vector: np.ndarray | None
    facts: Facts
    words: frozenset[int]
    negated: frozenset[int]
    held: Vocabulary | None = None
    # What it is about: the stems of its rare words (`wordfreq`, RARE_ZIPF) and of its rarest one,
    # "garden" in "let me tell you about my garden". Empty for a stored claim.
    anchors: frozenset[str] = frozenset()

    def stored_facts(self) -> dict[str, Any]:
        """The facts, words and negations as the forgotten_claims.facts column keeps them."""
        return {
            "names": {key: list(stems) for key, stems in self.facts.names.items()},
            "numbers": sorted(self.facts.numbers),
            "times": sorted(self.facts.times),
            "dates": sorted(self.facts.dates),
            "words": sorted(self.words),
            "negated": sorted(self.negated),
        }

    @classmethod
    def stored(cls, vector: Sequence[float], facts: dict[str, Any]) -> Statement:
        """A forgotten claim as stored (`stored_facts`)."""
        return cls(
            vector=unit_vector(vector),
            facts=Facts(
                {key: tuple(stems) for key, stems in facts["names"].items()},
                frozenset(facts["numbers"]),
                frozenset(facts["times"]),
                frozenset(facts["dates"]),
            ),
            words=frozenset(facts["words"]),
            negated=frozenset(facts["negated"]),
        )


def claim_text(content: str, personality_name: str) -> str:
    """What a memory's text says on the user's side: its lines without the personality's (and their
    continuation lines), speaker labels dropped. A summary without labels is itself."""
    return _side(content, personality_name, personality=False) or content.strip()


def reply_text(content: str, personality_name: str) -> str:
    """The personality's lines of a memory's text, labels dropped; "" for a summary without labels."""
    return _side(content, personality_name, personality=True)


def _side(content: str, personality_name: str, *, personality: bool) -> str:
    kept: list[str] = []
    speaker: str | None = None
    for line in content.splitlines():
        label = _LABEL.match(line)
        if label is not None:
            speaker = label.group(1).strip()
            line = line[label.end() :]
        if (speaker == personality_name) == personality and line.strip():
            kept.append(line.strip())
    return "\n".join(kept)


def statement(text: str, vector: Sequence[float] | None, *, speakers: Iterable[str] = ()) -> Statement:
    """What `text` says; the names of `speakers` (the user, the personality) are no facts of it:
    every memory of theirs holds them, or none does ("Alice's sister" against "my sister")."""
    names = [s for s in speakers if s]
    facts = key_facts(text, names=names)
    spoken = {" ".join(word_stem(w) for w in name.split()) for name in names}
    keys = facts.keys()
    return Statement(
        vector=unit_vector(vector) if vector is not None else None,
        facts=facts.only(key for key in keys if word_stem(key) not in spoken and key not in spoken),
        words=_terms(text),
        negated=frozenset(term for word in _NEGATED.findall(text) for term in _terms(word)),
        held=vocabulary(text),
        anchors=_anchors(text),
    )


def meaning_text(text: str, speakers: Iterable[str]) -> str:
    """The text as its meaning is embedded: the speakers' names taken out. "Lilith, my favourite colour
    is teal" and "Lilith, what is your favourite book?" are 0.65 alike to all-MiniLM-L6-v2 for the name
    they share (0.27 without it), which says nothing of what either claims."""
    names = sorted({n.strip() for n in speakers if n and n.strip()}, key=len, reverse=True)
    if not names:
        return text
    pattern = r"(?<![\w'’])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w'’])[,:]?"
    without = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    without = " ".join(without.split())
    return without.strip(" ,") or text


def closeness(a: Statement, b: Statement | np.ndarray) -> float:
    """The cosine of their meanings (or of the first's and a unit vector)."""
    other = b.vector if isinstance(b, Statement) else b
    if a.vector is None or other is None:
        raise ValueError("a statement without its vector")
    return float(a.vector @ other)


def says_again(later: Statement, earlier: Statement, *, cosine: float, at_least: float) -> bool:
    """Whether `later` says what `earlier` says (see the module docstring): their meanings at `cosine`
    (`closeness`, or the index's score) at least this close, every key fact of the earlier held, no
    word of one negated by the other."""
    return cosine >= at_least and holds_facts(later, earlier.facts) and not contradicts(later, earlier)


def holds_facts(statement: Statement, facts: Facts) -> bool:
    """Whether the statement holds every one of these facts, a name by any of its distinctive words."""
    held = statement.held
    if held is None:
        raise ValueError("a stored claim holds no vocabulary")
    values = held_values(held)
    return (
        all(any(stem in held.words for stem in stems) for stems in facts.names.values())
        and facts.numbers <= values
        and facts.times <= values
        and all(date in held.words for date in facts.dates)
    )


def held_values(held: Vocabulary) -> frozenset[str]:
    """The numbers and times a text holds, a full hour as its number and a number as the full hours
    it may be: "6am" holds 6, "at six" 6:00 and 18:00 ("plays the trumpet at 6am" is said again as
    "... at six every morning"); but a time is not its other side of noon ("6pm" is no "6am")."""
    return held.numbers | held.times | hour_numbers(held.times) | hours_as_times(held.numbers)


def shares_anchors(a: Statement, b: Statement) -> bool:
    """Whether each holds every one of the other's anchors, a word by its first SHARED_PREFIX letters
    ("allergy" holds "allergic"): "I practised chess" and "I practised salsa" share "practised" but
    are about different things."""
    if a.held is None or b.held is None:
        raise ValueError("a stored claim holds no vocabulary")
    return _holds_words(b.held.words, a.anchors) and _holds_words(a.held.words, b.anchors)


def _holds_words(held: frozenset[str], words: Iterable[str]) -> bool:
    return all(
        word in held or (len(word) >= SHARED_PREFIX and any(h.startswith(word[:SHARED_PREFIX]) for h in held))
        for word in words
    )


def contradicts(a: Statement, b: Statement) -> bool:
    """Whether one of the two negates a word the other affirms (one negates, the other not)."""
    if bool(a.negated) == bool(b.negated):
        return False
    return bool(a.negated & b.words) or bool(b.negated & a.words)


def _anchors(text: str) -> frozenset[str]:
    """The stems of the text's words rarer than RARE_ZIPF, and of its rarest word (wordfreq); numbers
    are facts, not anchors ("ninety-one" is 91, "12th" no word "th"), nor are a possessive's forms."""
    words = [
        (zipf(w.casefold().removesuffix("'s").removesuffix("’s")), word_stem(w))
        for w in _WORD.findall(text)
        if len(w) > 2 and not vocabulary(w).numbers
    ]
    rarest = min(words, default=None)
    return frozenset(stem for z, stem in words if z < RARE_ZIPF or (z, stem) == rarest)


def _terms(text: str) -> frozenset[int]:
    """The text's words as the keyword analyzer reads them (stemmed, stopwords out)."""
    return frozenset(encode_sparse_query(text).indices)


def unit_vector(vector: Sequence[float]) -> np.ndarray:
    """The vector scaled to length 1 (the local embedder's already are; a remote one's may not be)."""
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array
