"""How a question is read before it is searched: which of its words carry the search, and its shape.

A question is mostly words that shape it ("what", "does", "how many", "tell me", "name"): in a memory
they are noise, and on the keyword side they find whatever memory happens to hold "much" or
"called". The words that carry it are its entities (names, numbers) and content words. This is
decided from the question's structure alone, with the closed classes of English grammar and a few
words of asking, never from a list of what some data set talks about:

- wh-words, auxiliaries and pronouns shape a question (most are stopwords of the keyword analyzer
  anyway), and so do the word right after "how" ("how old", "how many", "how often"), the noun of a
  "what kind of" / "which type of" phrase, the words of naming, telling and vague quantity
  (`_SHAPING`), and the names of the two who talk in every memory (memory.recall.query).
- A capitalised word inside the sentence, or a number, is an entity and weighs most, even one that
  would shape a question in lower case ("in May", "Will's bike").
- "my", "I", "me" make it a question about the user: their own lines are preferred
  (memory.recall.keywords keys what the user said apart from the rest of the exchange). Naming one
  of the two who talk, other than to address them ("What did Melanie paint?", not "Lilith, ..."),
  makes it a question about their life together (`about_participants`).
- A question asking for several things gathers (`gathers`): a plural noun asked about ("what
  hobbies", "which shelters"), "which", "what kinds", "all", "ever", "every".
- What its wh-phrase asks for is the kind of answer a memory must hold to answer it
  (`AnswerKind`): "when" or "what date" a time, "how much/many/old/long" an amount, "who" a person
  and "where" a place (a name in the sentence).
- Its head (`head`): the noun it asks about, where its structure shows one. "What's my sister's
  address?" asks for an address, of a sister: a memory with the sister and no address does not
  answer it. The head is the last content word of the noun phrase after "what/which/who/where
  (+ be)" or "how old (+ be)" ("what's my home address", "which herb can't I", "what pet do I"), the
  noun after "of" when that phrase only shapes ("the name of my dog", "what kind of art"), the noun
  of "how many wolves". It is matched in all its forms (memory.recall.word_forms, lemminflect's tables
  of English inflection: "wolves" and "wolf", which the stemmer alone does not join). Searching every content
  word in all its forms ("did I buy" finding "bought") was measured and left out: one more direct
  question on bench.recall_questions, LoCoMo dev r@10 1.8 less in summarized mode.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from memory.recall.keywords import encode_sparse_query, own_line_terms, query_terms
from memory.recall.word_forms import other_forms
from memory.types import SparseVector

# The keyword weight of a content word and of an entity. A word that only shapes the question is not
# searched at all: a keyword hit is then always a memory sharing what the question is about.
CONTENT_WEIGHT = 1.0
ENTITY_WEIGHT = 1.5
# The share of a content word's weight also asked of the user's own lines, in a question about them:
# 0.5 and 1.0 measured 78.9% and 80.5% direct questions first on bench.recall_questions (72.7% without
# own lines), 2.0 as 1.0; LoCoMo's questions are in the third person, unchanged.
OWN_LINES_SHARE = 1.0

_WH = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "whats"})
_AUXILIARIES = frozenset({
    "am", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "have", "has", "had",
    "can", "could", "will", "would", "shall", "should", "may", "might", "must", "s", "d", "ll", "ve",
    "re", "m",
})  # fmt: skip
# "we" and "our" in a chat with a personality are the user and it: their life together.
_USER = frozenset(
    {"i", "me", "my", "mine", "myself", "im", "ive", "id", "we", "us", "our", "ours", "ourselves"}
)
_PRONOUNS = _USER | frozenset({
    "you", "your", "yours", "yourself", "we", "us", "our", "ours", "he", "him", "his", "she", "her",
    "hers", "they", "them", "their", "theirs", "it", "its", "this", "that", "these", "those", "there",
    "here",
})  # fmt: skip
# Words of asking: naming, telling and remembering, vague quantity and kind. They say what is asked
# for, never what it is about.
_SHAPING = frozenset({
    "name", "names", "named", "called", "call", "tell", "told", "say", "said", "mention", "mentioned",
    "talk", "talked", "remember", "remind", "recall", "know", "knew", "think", "thing", "things",
    "stuff", "anything", "something", "everything", "kind", "kinds", "type", "types", "sort", "sorts",
    "many", "much", "lot", "lots", "ever", "every", "all", "any", "some", "else", "also", "again",
    "please", "like",
})  # fmt: skip
# Words of a question asking for several things.
_GATHERING = frozenset({"which", "all", "ever", "every", "everything", "kinds", "types", "sorts", "list"})
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# Words that end a noun phrase: prepositions and conjunctions (closed classes).
_PREPOSITIONS = frozenset({
    "of", "on", "in", "at", "to", "for", "from", "with", "about", "by", "into", "after", "before",
    "during", "since", "until", "and", "or", "but", "while", "when", "if", "than", "as",
})  # fmt: skip
_DETERMINERS = frozenset(
    {"the", "a", "an", "my", "your", "his", "her", "their", "our", "its", "this", "that"}
)
_TIME_NOUNS = frozenset({"time", "date", "dates", "day", "days", "month", "year", "week"})
_DEGREES = frozenset({"much", "many", "old", "long", "far", "often", "big", "tall", "heavy", "fast"})


class AnswerKind(enum.Enum):
    """What a question's wh-phrase asks for."""

    TIME = "time"
    AMOUNT = "amount"
    PERSON = "person"
    PLACE = "place"
    NAME = "name"  # "what is my dog called", "what's her name": a name, as for a person or a place


_MONTHS = "january february march april may june july august september october november december"
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_DATE_WORDS = frozenset(_MONTHS.split()) | frozenset(_WEEKDAYS.split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NAMING = frozenset({"called", "name", "named", "names", "call"})
_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty "
    "seventy eighty ninety hundred thousand million dozen half"
)
_HOLDS: dict[AnswerKind, re.Pattern[str]] = {
    # A date, a day, a time of day, a year, or a time said relatively ("yesterday", "last week").
    AnswerKind.TIME: re.compile(
        rf"\b(?:{_MONTHS.replace(' ', '|')}|{_WEEKDAYS.replace(' ', '|')})\b"
        r"|\b\d{1,2}(?:st|nd|rd|th)\b|\b(?:1[89]|20)\d{2}\b|\b\d{1,2}(?::\d{2}|\s?[ap]m)\b"
        r"|\b(?:yesterday|today|tonight|tomorrow|ago|weekend)\b"
        r"|\b(?:last|next|this)\s+(?:week|month|year|summer|winter|spring|autumn|fall|night|time)\b",
        re.IGNORECASE,
    ),
    AnswerKind.AMOUNT: re.compile(rf"\d|\b(?:{_NUMBER_WORDS.replace(' ', '|')})\b", re.IGNORECASE),
}
# A name inside a sentence: a capitalised word after a lowercase word, a comma or a number.
_NAME_IN_SENTENCE = re.compile(r"(?<=[a-z0-9,;] )([A-Z][\w'’-]+)")


# A query that lists keywords ("PIN cat tea") searches for each: a text holding one of them counts as
# this share of it at least (the relevance floor then asks a cosine of 0.15, that of loosely related
# texts), not a third. bench.recall_questions: unrelated-empty 95.0 / 94.7 -> 94.4 / 94.4 % (verbatim /
# summarized); a share of 1 (any keyword enough) gave 88.9 %, "best" or "cost" then being enough.
LISTED_WORD_SHARE = 0.45


@dataclass(frozen=True, slots=True)
class Question:
    """A query as recall reads it: its weighted keywords and its shape."""

    keywords: SparseVector
    # The keyword terms of its entities and content words, with their weights.
    content_terms: dict[int, float]
    about_user: bool
    about_participants: bool
    gathers: bool
    answer_kind: AnswerKind | None
    # The participants' names and the question's own words, lowercased: no answer to "who".
    known: frozenset[str] = frozenset()
    # The keyword terms of the noun asked about, in all its forms, if the question's structure shows one.
    head: frozenset[int] = frozenset()
    # A query that is a list of keywords ("PIN cat tea"): each word's terms, each a search of its own.
    listed: tuple[frozenset[int], ...] = ()
    # The keyword terms of its rarest carrying word (wordfreq): what a general question is about, the
    # "vaccines" of "how do vaccines work?" (not "work").
    topic: frozenset[int] = frozenset()

    def holds_head(self, text: str) -> bool:
        """Whether the text holds the noun the question asks about (False: it shows none)."""
        return self.head_among(query_terms(text))

    def head_among(self, terms: AbstractSet[int]) -> bool:
        """`holds_head` of a text whose terms (`query_terms`) are these."""
        return not self.head.isdisjoint(terms)

    def holds_answer(self, text: str) -> bool:
        """Whether the text holds the kind of thing the question asks for (False: asks for none)."""
        if self.answer_kind is None:
            return False
        pattern = _HOLDS.get(self.answer_kind)
        if pattern is not None:
            return pattern.search(text) is not None
        names = (name.lower() for name in _NAME_IN_SENTENCE.findall(text))
        return any(name not in self.known and name not in _DATE_WORDS for name in names)  # "on May 12th"

    def coverage(self, text: str) -> float:
        """The share of the question's content (by weight) that the text holds: 0 without any."""
        return self.coverage_of(query_terms(text))

    def coverage_of(self, held: AbstractSet[int]) -> float:
        """`coverage` of a text whose terms (`query_terms`) are these."""
        total = sum(self.content_terms.values())
        if not total:
            return 0.0
        share = sum(w for term, w in self.content_terms.items() if term in held) / total
        if any(word <= held for word in self.listed):  # one whole keyword of a list searched for each
            return max(share, LISTED_WORD_SHARE)
        return share


def asked_in(text: str) -> tuple[str, str]:
    """The text's questions (sentences ending in "?" that open with a wh-word or an auxiliary: "What
    is my dog called?", not "I'm moving to Lisbon, what do you think?"), and the rest of it."""
    asked: list[str] = []
    rest: list[str] = []
    for sentence in _SENTENCE.split(text.strip()):
        opening = _WORD.match(sentence.strip())
        first = opening.group().lower().split("'")[0] if opening else ""
        is_question = sentence.rstrip().endswith("?") and (first in _WH or first in _AUXILIARIES)
        (asked if is_question else rest).append(sentence)
    return " ".join(asked), " ".join(rest)


def read_question(query: str, names: Collection[str] = ()) -> Question:
    """Weigh the query's words by the part they play, and tell its shape; `names` are the
    participants'."""
    named = {part.lower() for name in names for part in _WORD.findall(name)}
    words = _WORD.findall(query)
    lowered = [w.lower().replace("’", "'") for w in words]
    bare = [w.split("'")[0] for w in lowered]
    content: dict[int, float] = {}
    carrying: list[bool] = []  # per word: does it carry the search (an entity or a content word)
    # Per carrying word: the word (None for a date) and its terms.
    rarity: list[tuple[str | None, frozenset[int]]] = []
    about_user = any(w in _USER for w in bare)
    gathers = any(w in _GATHERING for w in bare)
    for position, (word, low) in enumerate(zip(words, bare, strict=True)):
        previous = bare[position - 1] if position else ""
        following = bare[position + 1] if position + 1 < len(bare) else ""
        entity = word[0].isdigit() or (position > 0 and word[0].isupper() and low != "i")
        shaping = low in named or (
            not entity
            and (
                low in _WH
                or low in _AUXILIARIES
                or low in _PRONOUNS
                or low in _SHAPING
                or previous == "how"  # how old, how many, how often: the degree asked for
                or (previous in _WH and following == "of")  # what kind of, which type of
            )
        )
        if previous in _WH and _plural(low) and not shaping:
            gathers = True  # what hobbies, which shelters
        terms = encode_sparse_query(word).indices  # none for a stopword
        carrying.append(bool(terms) and not shaping)
        if shaping:
            continue
        if terms:
            # A date asks by the memory's date (memory.recall.keywords keys it), not by its words.
            dated = word[0].isdigit() or low in _DATE_WORDS
            rarity.append((None, frozenset()) if dated else (low, frozenset(terms)))
        weight = ENTITY_WEIGHT if entity else CONTENT_WEIGHT
        for term in terms:
            content[term] = max(content.get(term, 0.0), weight)
    # Every word carries the search, and there are several: a list of keywords, not a sentence.
    listed = (
        tuple(frozenset(encode_sparse_query(word).indices) for word in words)
        if len(words) > 1 and all(carrying)
        else ()
    )
    weights = dict(content)
    if about_user:
        for term, weight in own_line_terms(content).items():
            weights[term] = OWN_LINES_SHARE * weight
    ordered = sorted(weights.items())
    head = _head(lowered, carrying)
    return Question(
        keywords=SparseVector(indices=[t for t, _ in ordered], values=[w for _, w in ordered]),
        content_terms=content,
        about_user=about_user,
        about_participants=_mentions(query, named),
        gathers=gathers,
        answer_kind=_answer_kind(bare),
        known=frozenset(named | set(bare)),
        head=frozenset(encode_sparse_query(" ".join({head, *other_forms(head)})).indices if head else ()),
        listed=listed,
        # None for a date, nor for a list of keywords: any one of them is what it asks about.
        topic=_rarest(rarity) if rarity and not listed else frozenset(),
    )


def _rarest(rarity: list[tuple[str | None, frozenset[int]]]) -> frozenset[int]:
    """The terms of the rarest word (a date first: it asks by the memory's date, so no topic)."""
    if len(rarity) == 1:
        return rarity[0][1]  # one word: no need to load wordfreq's tables (~0.5 s of a cold recall)
    from wordfreq import zipf_frequency

    return min(rarity, key=lambda r: -1.0 if r[0] is None else zipf_frequency(r[0], "en"))[1]


def _mentions(query: str, names: Collection[str]) -> bool:
    """Whether the query names one of `names` other than to address them: not its first or last
    word, nor next to a comma, a colon or an @ ("Lilith, ...", "@Lilith", "..., Lilith?")."""
    words = list(_WORD.finditer(query))
    for position, match in enumerate(words):
        if match.group().lower().split("'")[0].split("’")[0] not in names:
            continue
        before = query[: match.start()].rstrip()[-1:]
        after = query[match.end() :].lstrip()[:1]
        if 0 < position < len(words) - 1 and before not in (",", "@", ":") and after not in (",", ":"):
            return True
    return False


def _answer_kind(words: list[str]) -> AnswerKind | None:
    """What the question's first wh-phrase asks for."""
    for position, word in enumerate(words):
        following = words[position + 1] if position + 1 < len(words) else ""
        if word == "when" or (word in ("what", "which") and following in _TIME_NOUNS):
            return AnswerKind.TIME
        if word == "how" and following in _DEGREES:
            return AnswerKind.AMOUNT
        if word in ("who", "whom", "whose"):
            return AnswerKind.PERSON
        if word == "where":
            return AnswerKind.PLACE
        if word in ("what", "which") and _NAMING.intersection(words):
            return AnswerKind.NAME
    return None


def _plural(word: str) -> bool:
    """A word that reads as a plural noun (hobbies, shelters, dogs), not "is", "glass" or "bus"."""
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "'s"))


def _head(lowered: list[str], carrying: list[bool]) -> str | None:
    """The noun the question asks about, where its structure shows one (see the module's text)."""
    bare = [w.split("'")[0] for w in lowered]
    for start, word in enumerate(bare):
        following = bare[start + 1] if start + 1 < len(bare) else ""
        at = start + 1
        if word == "how" and following in ("many", "much"):
            return bare[at + 1] if at + 1 < len(bare) and carrying[at + 1] else None  # how many wolves
        if word in ("what", "which"):
            if at + 1 < len(bare) and not carrying[at] and bare[at + 1] == "of":
                at += 2  # what kind of art
            if at < len(bare) and carrying[at]:
                # "which herb can't I stand", "what pet do I have": content words up to an auxiliary.
                end = at
                while end < len(bare) and carrying[end]:
                    end += 1
                asked = bare[end - 1] if end < len(bare) and bare[end] in _AUXILIARIES else None
                return None if asked in _TIME_NOUNS else asked
            break
        if word in ("who", "where") or (word == "how" and following == "old"):
            at += word == "how"
            break
    else:
        return None
    # "what's my sister's address", "how old is my grandmother", "who is my sister": be, then a
    # noun phrase opened by a determiner or a possessive, up to a preposition or a verb.
    if not lowered[start].endswith("'s"):
        if at >= len(bare) or bare[at] not in ("is", "are", "was", "were"):
            return None
        at += 1
    if at >= len(bare) or not (bare[at] in _DETERMINERS or lowered[at].endswith("'s")):
        return None
    head = None
    for position in range(at, len(bare)):
        word = bare[position]
        if word == "of" and head is None:
            continue  # "the name of my dog": the phrase only shapes, the noun after "of" carries it
        if word in _PREPOSITIONS or word in _AUXILIARIES or word in _WH:
            break
        if carrying[position]:
            head = word
    # "what time", "what's the date": the kind of answer asked for (AnswerKind), not what it is about.
    return None if head in _TIME_NOUNS else head
