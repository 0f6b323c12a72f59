"""What a correction took back, and who may say it again (pure).

A correction ("My horse is called Bramble" for "... Thistle") records the values it took out of the
claim (`WrongValues`): the names the correction no longer holds (or, when no name changed, the rare
words it swapped for others), and the numbers and dates it changed. A memory that states one of
them, on any side of its exchange (the user's words or the personality's), states the wrong claim:
the correction supersedes it. A number or a date on its own is too common to tell ("3 bags of food"
is no "3 cats"): it counts only beside a word of what the claim is about, one the correction kept
("cat").

Who said it decides what happens to a new memory (`Verdict`): the user saying the claim again after
it was corrected or forgotten is their newest word, remembered; anything else that states it (the
personality's reply, or the user's words from before the correction, formed late) is superseded as
it is formed.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memory.formation.fidelity import Vocabulary, key_facts, vocabulary, word_stem, zipf
from memory.formation.restatements import RARE_ZIPF, held_values

# A word of what a claim is about is rarer than this (Zipf): "cat" (4.9), "sister" (5.0), not "have"
# (6.9) or "called" (5.6).
SUBJECT_ZIPF = 5.5
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


class Verdict(enum.Enum):
    """What a new memory does with a recorded claim."""

    NONE = "none"  # it does not state the claim
    RESTATED = "restated"  # the user says it again: their newest word
    SUPERSEDED = "superseded"  # it states the claim, not as the user's newest word


@dataclass(frozen=True, slots=True)
class WrongValues:
    """The values a correction took out of a claim (see the module docstring), as word stems."""

    words: frozenset[str]
    numbers: frozenset[str]
    subject: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.words or self.numbers)

    def stated_in(self, held: Vocabulary) -> bool:
        """Whether a text holding this vocabulary states one of the wrong values."""
        if self.words & held.words:
            return True
        return bool(self.numbers & (held_values(held) | held.words)) and (
            not self.subject or bool(self.subject & held.words)
        )

    def words_in(self, text: str) -> str:
        """The words of `text` that are wrong values, as written (for a keyword search)."""
        return " ".join(w for w in _WORD.findall(text) if word_stem(w) in self.words)

    def as_json(self) -> dict[str, Any]:
        return {"words": sorted(self.words), "numbers": sorted(self.numbers), "subject": sorted(self.subject)}

    @classmethod
    def from_json(cls, stored: dict[str, Any] | None) -> WrongValues | None:
        if not stored:
            return None
        return cls(frozenset(stored["words"]), frozenset(stored["numbers"]), frozenset(stored["subject"]))


def wrong_values(claim: str, correction: str, *, speakers: Iterable[str] = ()) -> WrongValues:
    """What `correction` took out of `claim`: its names and rare words the correction does not hold,
    its numbers, times and dates the correction changed; the speakers' names are never values."""
    names = [s for s in speakers if s]
    spoken = {word_stem(w) for name in names for w in name.split()}
    facts = key_facts(claim, names=names)
    kept = vocabulary(correction)
    words = {
        stem
        for stems in facts.names.values()
        if not any(s in kept.words for s in stems)
        for stem in stems
        if stem not in spoken
    }
    rare = _content_stems(claim, spoken)
    if not words:
        # No name changed: a rare word the correction swapped for another ("thistle" for "bramble"),
        # not one it merely left out ("a grey cob" untold is not wrong).
        dropped = {stem for stem, z in rare.items() if z < RARE_ZIPF and stem not in kept.words}
        added = {s for s, z in _content_stems(correction, spoken).items() if z < RARE_ZIPF and s not in rare}
        words = dropped if added else set()
    numbers = {n for n in facts.numbers if n not in kept.numbers}
    numbers |= {t for t in facts.times if t not in kept.times}
    numbers |= {d for d in facts.dates if d not in kept.words}
    subject = {stem for stem, z in rare.items() if z < SUBJECT_ZIPF and stem in kept.words}
    return WrongValues(frozenset(words), frozenset(numbers), frozenset(subject))


def _content_stems(text: str, spoken: set[str]) -> dict[str, float]:
    """The stems of the text's words (three letters or more, speakers' names aside) by their Zipf
    frequency; numbers are facts, not words."""
    stems: dict[str, float] = {}
    for word in _WORD.findall(text):
        if len(word) <= 2 or vocabulary(word).numbers:
            continue
        stem = word_stem(word)
        if stem not in spoken:
            stems[stem] = min(stems.get(stem, 99.0), zipf(word.casefold().removesuffix("'s")))
    return stems
