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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from text_to_num import alpha2digit

from memory.formation.cleaning import strip_chat_template_tokens

# A word at least this frequent (zipf: log10 of uses per billion words) is a common word at a
# sentence's start, no name (tuned on bench.summaries' labelled sets); one at least DISTINCTIVE_ZIPF
# frequent, in a name of several words, is not what identifies it.
COMMON_ZIPF = 3.3
DISTINCTIVE_ZIPF = 4.5

_MONTHS = {
    "january": "january", "february": "february", "march": "march", "april": "april", "may": "may",
    "june": "june", "july": "july", "august": "august", "september": "september", "october": "october",
    "november": "november", "december": "december", "jan": "january", "feb": "february",
    "mar": "march", "apr": "april", "jun": "june", "jul": "july", "aug": "august", "sep": "september",
    "sept": "september", "oct": "october", "nov": "november", "dec": "december",
}  # fmt: skip
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
# Weekdays shortened, when capitalized ("last Fri"); "Sat" and "Sun" are words too often.
_WEEKDAY_ABBREVIATIONS = {
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "fri": "friday",
}  # fmt: skip
# "Mr. Pike": a title's dot ends no sentence, and the title is no name of its own.
_TITLES = frozenset({"mr", "mrs", "ms", "mx", "dr", "prof", "st", "sr", "jr", "mt"})
_MONTH_NUMBERS = [
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
]  # fmt: skip
# Months that are also everyday words: a month only when capitalized, and "May" opening a sentence
# only before a number ("May I ask" is no date).
_AMBIGUOUS_MONTHS = {"may", "march", "august"}

_NOT_FACTS_RE = re.compile(
    r"(?:https?|ftp)://\S+|www\.\S+|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"
    r"|<a?:\w{1,32}:\d{1,25}>|<(?:@[!&]?|#)\d{1,25}>|<t:-?\d{1,20}(?::\w)?>",
    re.IGNORECASE,
)
# `Name: text` at a line start, as `memory.formation.exchanges.render_lines` writes: who spoke is not a
# fact of what they said (but a name the text knows).
_SPEAKER_LABEL_RE = re.compile(r"^[ \t]*([^\s:.!?,][^\n:.!?,]{0,39}?)[ \t]*:(?=\s|$)", re.MULTILINE)
_TIME_RE = re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_ISO_DATE_RE = re.compile(r"(?<![\w/.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w/-])")
_NUMERIC_DATE_RE = re.compile(r"(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?![\w/-])")
_NUMBER_RE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\.\d)(?!,\d{3})")
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
# "second" is an ordinal to text2num ("wait a second": 2nd); kept as a word.
_SECOND_RE = re.compile(r"\bsecond(s?)\b", re.IGNORECASE)
_SECOND_MARK = "\ue002"
_SENTENCE_END = ".!?…:;\n\r"
_OPENERS = " \t\"'“”‘’(*_[«>-"
# Lower-case words that join the parts of one name: "Bank of America", "Leonardo da Vinci".
_NAME_JOINERS = frozenset({"of", "de", "da", "del", "della", "van", "von", "der", "la", "le", "du", "st"})
# Never names, wherever they stand and however rare wordfreq finds them.
_NEVER_NAMES_TEXT = """i i'm i've i'll i'd user assistant ok okay lol lmao rofl haha hehe hah xd uwu owo omg
    omfg hmm hmmm aww awww ooh oooh ohh ugh yay yayy woohoo wooo yeah yess yesss nope nah pls plz thx
    ty tbh idk imo imho btw brb gg ikr smh ngl fr rn lmk np congrats bye oof whoa woah yikes welp"""
_NEVER_NAMES = frozenset(_NEVER_NAMES_TEXT.split()) | _TITLES


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

    def holds(self, facts: Facts) -> list[str]:
        """The keys of `facts` this text does not hold, sorted."""
        missing = [key for key, stems in facts.names.items() if not all(s in self.words for s in stems)]
        missing += [n for n in facts.numbers if n not in self.numbers]
        missing += [t for t in facts.times if t not in self.times]
        missing += [d for d in facts.dates if d not in self.words]
        return sorted(missing)


@functools.lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """How common a word is; a hyphenated one as its rarest part ("bubble-wrap" is common)."""
    if "-" in word:
        return min(zipf(part) for part in word.split("-") if part) if word.strip("-") else 0.0
    # Imported on the first fact checked: wordfreq and its language data take ~0.3 s to load, which a
    # command that forms no memory (recall, the chat's start) should not pay.
    from wordfreq import zipf_frequency

    frequency: float = zipf_frequency(word, "en")
    return frequency


def _possessive_dropped(word: str) -> str:
    if word.endswith("'s"):
        return word[:-2]
    return word[:-1] if word.endswith("'") else word


def word_stem(word: str) -> str:
    """A word as facts compare it: case-folded, without its possessive or a plural's `s`."""
    word = _possessive_dropped(word.casefold().replace("’", "'"))
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _canonical_number(text: str) -> str:
    number = text.replace(",", "")
    if "." in number:
        number = number.rstrip("0").rstrip(".") or "0"
    return number.lstrip("0") or "0"


def _canonical_time(hours: str, minutes: str, seconds: str | None) -> str:
    return f"{int(hours)}:{minutes}" + (f":{seconds}" if seconds else "")


def _numbers_as_digits(text: str, *, threshold: int) -> str:
    """Number words as digits ("twenty-two" -> "22"); isolated ones only from `threshold` up."""
    if not any(c.isalpha() for c in text):
        return text
    protected = _SECOND_RE.sub(lambda m: _SECOND_MARK + m.group(1), text)
    converted: str
    try:
        converted = alpha2digit(protected, "en", threshold=threshold)
    except Exception:  # text2num is written in Rust: any odd input must not cost a memory
        converted = protected
    return converted.replace(_SECOND_MARK, "second")


def _speakers(text: str) -> tuple[str, set[str]]:
    """The text without its `Name:` labels, and the labels' names (case-folded words)."""
    names: set[str] = set()

    def drop(match: re.Match[str]) -> str:
        label = match.group(1)
        if len(label.split()) > 4:
            return match.group()
        names.update(word_stem(w) for w in _WORD_RE.findall(label))
        return ""

    return _SPEAKER_LABEL_RE.sub(drop, text), names


def _is_sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    if i >= 0 and text[i] == ".":
        word_start = i
        while word_start > 0 and text[word_start - 1].isalpha():
            word_start -= 1
        if text[word_start:i].casefold() in _TITLES:
            return False
    return i < 0 or text[i] in _SENTENCE_END


def _dated(text: str, numbers: set[str], dates: set[str]) -> str:
    """Numeric dates read into their parts (numbers, and the month of an ISO date), blanked."""

    def iso(match: re.Match[str]) -> str:
        year, month, day = match.groups()
        numbers.update((_canonical_number(year), _canonical_number(day)))
        if 1 <= int(month) <= 12:
            dates.add(_MONTH_NUMBERS[int(month) - 1])
        return " "

    def numeric(match: re.Match[str]) -> str:
        first, _, second, year = match.groups()
        numbers.update(_canonical_number(part) for part in (first, second, year))
        return " "

    return _NUMERIC_DATE_RE.sub(numeric, _ISO_DATE_RE.sub(iso, text))


def _timed(text: str, times: set[str]) -> str:
    def keep(match: re.Match[str]) -> str:
        times.add(_canonical_time(*match.groups()))
        return " "

    return _TIME_RE.sub(keep, text)


def _prepared(text: str) -> tuple[str, set[str], set[str], set[str], set[str]]:
    """The text ready for words and numbers: labels, links, dates and times taken out."""
    text, speakers = _speakers(strip_chat_template_tokens(text))
    text = _NOT_FACTS_RE.sub(" ", text)
    numbers: set[str] = set()
    dates: set[str] = set()
    times: set[str] = set()
    text = _timed(_dated(text, numbers, dates), times)
    return text, speakers, numbers, dates, times


def key_facts(text: str, *, names: Iterable[str] = ()) -> Facts:
    """The key facts of `text`; `names` are names known beyond it (the speakers of an exchange)."""
    text, speakers, numbers, dates, times = _prepared(text)
    text = _numbers_as_digits(text, threshold=2)
    numbers.update(_canonical_number(m.group()) for m in _NUMBER_RE.finditer(text))
    known = speakers | {word_stem(n) for n in names}
    tokens = [(m.group(), m.start(), m.end()) for m in _WORD_RE.finditer(text)]
    lowercase: set[str] = set()  # words the text writes in lower case, and their stems
    for word, _, _ in tokens:
        if word[0].islower():
            lowercase.update((word.casefold(), word_stem(word)))
    # A word capitalized where no sentence starts, anywhere in the text, is a name the text knows;
    # so is one that opens two sentences and is never written in lower case ("Harold ... Harold").
    openings: dict[str, int] = {}
    for word, start, _ in tokens:
        if word[0].isupper() and not word.isupper():
            if not _is_sentence_initial(text, start):
                known.add(word_stem(word))
            else:
                openings[word_stem(word)] = openings.get(word_stem(word), 0) + 1
    known.update(
        stem
        for stem, count in openings.items()
        if count > 1 and stem not in lowercase and stem not in _NEVER_NAMES and _may_be_a_name(stem)
    )
    found: dict[str, tuple[str, ...]] = {}
    run: list[str] = []
    joiners: list[str] = []
    previous_end = -1

    def close_run() -> None:
        if run:
            key = " ".join(_possessive_dropped(w.casefold().replace("’", "'")) for w in run)
            stems = tuple(word_stem(w) for w in run)
            distinctive = tuple(s for s in stems if zipf(s) < DISTINCTIVE_ZIPF) or stems
            found[key] = distinctive
        run.clear()
        joiners.clear()

    for word, start, end in tokens:
        adjacent = previous_end >= 0 and text[previous_end:start] == " "
        previous_end = end
        folded = word.casefold().replace("’", "'")
        if word[0].islower():
            if run and adjacent and folded in _NAME_JOINERS:
                joiners.append(word)
                continue
            close_run()
            continue
        month = _MONTHS.get(folded.rstrip("."))
        initial = _is_sentence_initial(text, start)
        if folded in _WEEKDAY_ABBREVIATIONS:
            folded = _WEEKDAY_ABBREVIATIONS[folded]
        if month is not None or folded in _WEEKDAYS:
            if month in _AMBIGUOUS_MONTHS and initial:
                following = text[end : end + 3].lstrip()
                if not following[:1].isdigit():
                    close_run()
                    continue
            dates.add(month or folded)
            close_run()
            continue
        if not _is_name(word, folded, initial, text, end, known, lowercase) and not (
            initial and _coordinated(text, end, known)
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
    for word in _lowercase_dates(tokens):
        dates.add(word)
    return Facts(found, frozenset(numbers), frozenset(times), frozenset(dates))


def _may_be_a_name(stem: str) -> bool:
    """Not an everyday word, nor shaped like a verb or an adverb ("Searching", "Sadly")."""
    return zipf(stem) < DISTINCTIVE_ZIPF and not (len(stem) > 5 and stem.endswith(("ing", "ly", "ed")))


_COORDINATED_RE = re.compile(r" (?:and|&|or) ([^\W\d_][\w'’-]*)")


def _coordinated(text: str, end: int, known: set[str]) -> bool:
    """Whether a capitalized word is joined by "and" to a name the text knows ("Luna and Oliver")."""
    match = _COORDINATED_RE.match(text, end)
    return match is not None and match.group(1)[0].isupper() and word_stem(match.group(1)) in known


def _lowercase_dates(tokens: list[tuple[str, int, int]]) -> Iterable[str]:
    """Months and weekdays typed in lower case ("see you on monday"), bar the everyday words."""
    for word, _, _ in tokens:
        folded = word.casefold()
        if word[0].islower() and (folded in _WEEKDAYS or (folded in _MONTHS and len(folded) > 3)):
            month = _MONTHS.get(folded)
            if month not in _AMBIGUOUS_MONTHS:
                yield month or folded


def _is_name(
    word: str, folded: str, initial: bool, text: str, end: int, known: set[str], lowercase: set[str]
) -> bool:
    """Whether a capitalized word is (part of) a name; see the module docstring."""
    stem = word_stem(word)
    if folded in _NEVER_NAMES or stem in _NEVER_NAMES or len(stem) < 2:
        return False
    if stem in known:
        return True
    if word.isupper():
        # Shouting ("I GOT AN ALLOTMENT") is no name; a short rare acronym ("LGBTQ") is.
        return len(word) <= 5 and zipf(folded) < DISTINCTIVE_ZIPF
    if not initial:
        # Capitalized mid-sentence, but a common word the text also writes in lower case: emphasis.
        return not (folded in lowercase and zipf(folded) >= DISTINCTIVE_ZIPF)
    plain = _possessive_dropped(folded)
    if "'" in plain or (folded.endswith("in") and text[end : end + 1] in ("'", "’")):
        return False  # "They've", "Didn't", "Startin'": contractions open sentences, names rarely do
    if stem in lowercase or folded in lowercase:
        return False  # "Junipers like..." where the text also says "a juniper": a common noun
    if not _may_be_a_name(stem):
        return False  # "Seeing", "Wishing", "Apparently", "Started"
    return max(zipf(plain), zipf(stem)) < COMMON_ZIPF  # "Setbacks" is as common as "setback"


def extract_key_facts(text: str) -> set[str]:
    """The keys of the key facts of `text` (see `key_facts`)."""
    return key_facts(text).keys()


def vocabulary(text: str) -> Vocabulary:
    """What `text` holds for the fact checks (see Vocabulary)."""
    text, speakers, numbers, dates, times = _prepared(text)
    text = _numbers_as_digits(text, threshold=0)
    numbers.update(_canonical_number(m.group()) for m in _NUMBER_RE.finditer(text))
    words = set()
    for word in _WORD_RE.findall(text):
        folded = word.casefold()
        words.add(word_stem(word))
        # "Tues", "Jan." hold the dates key_facts reads from them.
        full = _MONTHS.get(folded) or _WEEKDAY_ABBREVIATIONS.get(folded)
        if full is not None:
            words.add(full)
    return Vocabulary(frozenset(words | speakers | dates), frozenset(numbers), frozenset(times))


def fidelity_misses(source: str, summary: str, *, names: Iterable[str] = ()) -> list[str]:
    """The key facts of `source` that `summary` dropped, sorted (speaker labels are no facts)."""
    return vocabulary(summary).holds(key_facts(source, names=names))


def foreign_facts(summary: str, allowed: Vocabulary, *, names: Iterable[str] = ()) -> list[str]:
    """The key facts of `summary` that the allowed text does not hold: invented, or someone else's."""
    return allowed.holds(key_facts(summary, names=names))
