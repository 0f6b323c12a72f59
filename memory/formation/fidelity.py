"""Key facts of a text, and the two checks a summary passes (pure, no I/O).

A key fact is a name (people, pets, places, organisations, titles), a number (digits or number
words: "twenty-two" is 22), a date (a month or a weekday; a numeric date gives its parts), a time,
or an amount (its number). A capitalized word is a name where a sentence does not start; at a
sentence's start only if the text names it elsewhere (a speaker, a capitalized mention) or it is a
rare word (`wordfreq`): "Seeing", "Pick" and "They've" open sentences, "Priya" and "Hollybrook" are
names. Number words are read by `text2num`.

The checks, both ways: `fidelity_misses` lists the facts of an exchange that its summary dropped
(formation carries them with the memory), and `foreign_facts` the facts of a summary that the allowed
text does not hold (invented, or another user's: the summary is rejected).

Names are read by memory.formation.names, numbers, times and dates by memory.formation.quantities,
and both stand on memory.formation.words (how common a word is, its stem).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.names import (
    NAME_JOINERS,
    coordinated,
    is_name,
    is_sentence_initial,
    may_be_a_name,
    opening_names,
    without_speakers,
)
from memory.formation.quantities import (
    AMBIGUOUS_MONTHS,
    MONTHS,
    NUMBER_RE,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAYS,
    canonical_number,
    counted,
    dated,
    hour_numbers,
    lowercase_dates,
    numbers_as_digits,
    thousands,
    time_readings,
    timed,
)
from memory.formation.words import (
    DISTINCTIVE_ZIPF,
    ENGLISH,
    NEVER_NAMES,
    WORD_RE,
    is_common_noun,
    is_latin,
    language,
    possessive_dropped,
    previous_word,
    word_stem,
    zipf,
)

__all__ = [
    "Facts",
    "Vocabulary",
    "extract_key_facts",
    "fidelity_misses",
    "foreign_facts",
    "key_facts",
    "vocabulary",
    "word_stem",
    "zipf",
]

_NOT_FACTS_RE = re.compile(
    r"(?:https?|ftp)://\S+|www\.\S+|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"
    r"|<a?:\w{1,32}:\d{1,25}>|<(?:@[!&]?|#)\d{1,25}>|<t:-?\d{1,20}(?::\w)?>",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Facts:
    """The key facts of a text: each name by its key (its words, case-folded) with the stems that
    identify it, and the numbers, times and dates (month and weekday names)."""

    names: dict[str, tuple[str, ...]]
    numbers: frozenset[str]
    times: frozenset[str]
    dates: frozenset[str]

    def keys(self) -> set[str]:
        return {*self.names, *self.numbers, *self.times, *self.dates}

    def only(self, keys: Iterable[str]) -> Facts:
        """These facts, restricted to `keys`."""
        kept = set(keys)
        return Facts(
            {key: stems for key, stems in self.names.items() if key in kept},
            self.numbers & kept,
            self.times & kept,
            self.dates & kept,
        )


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What a text holds, for telling whether a fact is in it: word stems (dates included), numbers
    (number words read as digits, "one" and "first" too) and times."""

    words: frozenset[str]
    numbers: frozenset[str]
    times: frozenset[str]
    language: str = ENGLISH  # what a summary too short to tell is read as
    latin: bool = True  # most of its letters Latin: a name spelled in them can be looked for
    # Other ways its numbers and times read: "2:30" is "14:30" too, "15:00" holds 3 and 15, "1.5k" 1500.
    readings: frozenset[str] = frozenset()

    def holds(self, facts: Facts) -> list[str]:
        """The keys of `facts` this text does not hold, sorted."""
        missing = [key for key, stems in facts.names.items() if not all(s in self.words for s in stems)]
        missing += [n for n in facts.numbers if n not in self.numbers and n not in self.readings]
        missing += [t for t in facts.times if t not in self.times and t not in self.readings]
        missing += [d for d in facts.dates if d not in self.words]
        return sorted(missing)


def _prepared(text: str, *, readings: bool = False) -> tuple[str, set[str], set[str], set[str], set[str]]:
    """The text ready for words and numbers: labels, links, dates and times taken out."""
    text, speakers = without_speakers(strip_chat_template_tokens(text))
    text = _NOT_FACTS_RE.sub(" ", text)
    numbers: set[str] = set()
    dates: set[str] = set()
    times: set[str] = set()
    text = timed(dated(text, numbers, dates, readings=readings), times)
    return text, speakers, numbers, dates, times


def key_facts(text: str, *, names: Iterable[str] = (), lang: str | None = None) -> Facts:
    """The key facts of `text`; `names` are names known beyond it (the speakers of an exchange),
    `lang` its language when known (else guessed: memory.formation.words.language)."""
    lang = lang or language(text)
    text, speakers, numbers, dates, times = _prepared(text)
    text = numbers_as_digits(text, threshold=2, lang=lang)
    numbers.update(canonical_number(m.group()) for m in NUMBER_RE.finditer(text))
    known = speakers | {word_stem(n) for n in names}
    tokens = [(m.group(), m.start(), m.end()) for m in WORD_RE.finditer(text)]
    lowercase: set[str] = set()  # words the text writes in lower case, and their stems
    for word, _, _ in tokens:
        if word[0].islower():
            lowercase.update((word.casefold(), word_stem(word)))
    # A word capitalized where no sentence starts, anywhere in the text, is a name the text knows;
    # so is one that opens two sentences and is never written in lower case ("Harold ... Harold").
    openings: dict[str, int] = {}
    for word, start, _ in tokens:
        noun = is_common_noun(word, lang, previous_word(text, start))
        if word[0].isupper() and not word.isupper() and not noun:
            if not is_sentence_initial(text, start):
                known.add(word_stem(word))
            else:
                openings[word_stem(word)] = openings.get(word_stem(word), 0) + 1
    known.update(
        stem
        for stem, count in openings.items()
        if count > 1 and stem not in lowercase and stem not in NEVER_NAMES and may_be_a_name(stem, lang)
    )
    found: dict[str, tuple[str, ...]] = {}
    run: list[str] = []
    joiners: list[str] = []
    previous_end = -1

    def close_run() -> None:
        if run:
            key = " ".join(possessive_dropped(w.casefold().replace("’", "'")) for w in run)
            # "Team von Lukas", "Bank of America": the joiner identifies nothing.
            stems = tuple(word_stem(w) for w in run if w.casefold() not in NAME_JOINERS)
            distinctive = tuple(s for s in stems if zipf(s) < DISTINCTIVE_ZIPF) or stems
            found[key] = distinctive
        run.clear()
        joiners.clear()

    for word, start, end in tokens:
        adjacent = previous_end >= 0 and text[previous_end:start] == " "
        previous_end = end
        folded = word.casefold().replace("’", "'")
        if word[0].islower():
            if run and adjacent and folded in NAME_JOINERS:
                joiners.append(word)
                continue
            close_run()
            continue
        if not word[0].isupper():
            close_run()  # a script without capitals (Japanese, Arabic): its names are not told apart
            continue
        month = MONTHS.get(folded.rstrip("."))
        initial = is_sentence_initial(text, start)
        if folded in WEEKDAY_ABBREVIATIONS:
            folded = WEEKDAY_ABBREVIATIONS[folded]
        if month is not None or folded in WEEKDAYS:
            if month in AMBIGUOUS_MONTHS and initial:
                following = text[end : end + 3].lstrip()
                if not following[:1].isdigit():
                    close_run()
                    continue
            dates.add(month or folded)
            close_run()
            continue
        if not is_name(word, folded, initial, text, end, known, lowercase, lang) and not (
            initial and coordinated(text, end, known)
        ):
            close_run()
            continue
        if run and not adjacent:
            close_run()
        run.extend(joiners)
        joiners.clear()
        run.append(word)
        if folded.endswith(("'s", "'")):
            close_run()  # "Nonna Rosa's San Marzanos": a possessive ends the name it closes
    close_run()
    for word in lowercase_dates(tokens):
        dates.add(word)
    return Facts(found, frozenset(numbers), frozenset(times), frozenset(dates))


def extract_key_facts(text: str) -> set[str]:
    """The keys of the key facts of `text` (see `key_facts`)."""
    return key_facts(text).keys()


def vocabulary(text: str) -> Vocabulary:
    """What `text` holds for the fact checks (see Vocabulary)."""
    lang = language(text)
    raw = text
    latin = is_latin(without_speakers(text)[0])
    text, speakers, numbers, dates, times = _prepared(text, readings=True)
    text = numbers_as_digits(text, threshold=0, lang=lang)
    numbers.update(canonical_number(m.group()) for m in NUMBER_RE.finditer(text))
    readings = time_readings(times) | hour_numbers(time_readings(times)) | thousands(text) | counted(raw)
    words = set()
    for word in WORD_RE.findall(text):
        folded = word.casefold()
        words.add(word_stem(word))
        # "Tues", "Jan." hold the dates key_facts reads from them.
        full = MONTHS.get(folded) or WEEKDAY_ABBREVIATIONS.get(folded)
        if full is not None:
            words.add(full)
    return Vocabulary(
        frozenset(words | speakers | dates),
        frozenset(numbers),
        frozenset(times),
        lang,
        latin,
        frozenset(readings),
    )


def fidelity_misses(source: str, summary: str, *, names: Iterable[str] = ()) -> list[str]:
    """The key facts of `source` that `summary` dropped, sorted (speaker labels are no facts)."""
    return vocabulary(summary).holds(key_facts(source, names=names))


def foreign_facts(summary: str, allowed: Vocabulary, *, names: Iterable[str] = ()) -> list[str]:
    """The key facts of `summary` that the allowed text does not hold: invented, or someone else's.

    A summary is read in its own language (its exchange's when too short to tell). A name spelled in
    Latin letters cannot be looked for in an exchange written in another script ("Cairo" for
    "القاهرة"): unchecked, not invented. A name opening a sentence as its subject ("Carol is her
    boss.") must be held too, however common the word.
    """
    lang = language(summary, default=allowed.language)
    facts = key_facts(summary, names=names, lang=lang)
    if not allowed.latin:
        facts = facts.only(k for k in facts.keys() if k not in facts.names or not is_latin(k))  # noqa: SIM118
    missing = allowed.holds(facts)
    if allowed.latin:
        missing += sorted(s for s in opening_names(summary, lang) - allowed.words if s not in missing)
    return missing
