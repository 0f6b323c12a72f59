"""Names as facts: which capitalized words of a text are (parts of) names (pure, no I/O).

A capitalized word is a name where a sentence does not start; at a sentence's start only if the text
names it elsewhere (a speaker, a capitalized mention) or it is a rare word (`wordfreq`): "Seeing",
"Pick" and "They've" open sentences, "Priya" and "Hollybrook" are names.
"""

from __future__ import annotations

import re

from memory.formation.words import (
    COMMON_ZIPF,
    DISTINCTIVE_ZIPF,
    ENGLISH,
    NEVER_NAMES,
    TITLES,
    WORD_RE,
    is_common_noun,
    possessive_dropped,
    previous_word,
    word_stem,
    zipf,
)

# `Name: text` at a line start, as `memory.formation.exchanges.render_lines` writes: who spoke is not a
# fact of what they said (but a name the text knows).
_SPEAKER_LABEL_RE = re.compile(r"^[ \t]*([^\s:.!?,][^\n:.!?,]{0,39}?)[ \t]*:(?=\s|$)", re.MULTILINE)
_SENTENCE_END = ".!?…:;\n\r"
_OPENERS = " \t\"'“”‘’(*_[«>-"
# Lower-case words that join the parts of one name: "Bank of America", "Leonardo da Vinci".
NAME_JOINERS = frozenset({"of", "de", "da", "del", "della", "van", "von", "der", "la", "le", "du", "st"})


def without_speakers(text: str) -> tuple[str, set[str]]:
    """The text without its `Name:` labels, and the labels' names (case-folded words)."""
    names: set[str] = set()

    def drop(match: re.Match[str]) -> str:
        label = match.group(1)
        if len(label.split()) > 4:
            return match.group()
        names.update(word_stem(w) for w in WORD_RE.findall(label))
        return ""

    return _SPEAKER_LABEL_RE.sub(drop, text), names


def is_sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    if i >= 0 and text[i] == ".":
        word_start = i
        while word_start > 0 and text[word_start - 1].isalpha():
            word_start -= 1
        if text[word_start:i].casefold() in TITLES:
            return False
    return i < 0 or text[i] in _SENTENCE_END


def may_be_a_name(stem: str, lang: str = ENGLISH) -> bool:
    """Not an everyday word, nor shaped like a verb or an adverb ("Searching", "Sadly")."""
    return zipf(stem, lang) < DISTINCTIVE_ZIPF and not (len(stem) > 5 and stem.endswith(("ing", "ly", "ed")))


_COORDINATED_RE = re.compile(r" (?:and|&|or) ([^\W\d_][\w'’-]*)")


def coordinated(text: str, end: int, known: set[str]) -> bool:
    """Whether a capitalized word is joined by "and" to a name the text knows ("Luna and Oliver")."""
    match = _COORDINATED_RE.match(text, end)
    return match is not None and match.group(1)[0].isupper() and word_stem(match.group(1)) in known


def is_name(
    word: str,
    folded: str,
    initial: bool,
    text: str,
    end: int,
    known: set[str],
    lowercase: set[str],
    lang: str = ENGLISH,
) -> bool:
    """Whether a capitalized word is (part of) a name; see the module docstring."""
    stem = word_stem(word)
    if folded in NEVER_NAMES or stem in NEVER_NAMES or len(stem) < 2:
        return False
    if stem in known:
        return True
    if is_common_noun(word, lang, previous_word(text, end - len(word))):
        return False  # German capitalizes its nouns
    if word.isupper():
        # Shouting ("I GOT AN ALLOTMENT") is no name; a short rare acronym ("LGBTQ") is.
        return len(word) <= 5 and zipf(folded) < DISTINCTIVE_ZIPF
    if not initial:
        # Capitalized mid-sentence, but a common word the text also writes in lower case: emphasis.
        return not (folded in lowercase and zipf(folded) >= DISTINCTIVE_ZIPF)
    plain = possessive_dropped(folded)
    if "'" in plain or (folded.endswith("in") and text[end : end + 1] in ("'", "’")):
        return False  # "They've", "Didn't", "Startin'": contractions open sentences, names rarely do
    if stem in lowercase or folded in lowercase:
        return False  # "Junipers like..." where the text also says "a juniper": a common noun
    if not may_be_a_name(stem, lang):
        return False  # "Seeing", "Wishing", "Apparently", "Started"
    return max(zipf(plain, lang), zipf(stem, lang)) < COMMON_ZIPF  # "Setbacks" is as common as "setback"


# Verbs that follow a one-word subject: "Carol is her boss.", "Harold turns ninety-one".
_SUBJECT_VERBS_TEXT = """is was has had says said told turns turned works worked lives lived will would
    ist war hat wird es era tiene tenía está est était"""
_SUBJECT_VERBS = frozenset(_SUBJECT_VERBS_TEXT.split())
_OPENING_SUBJECT_RE = re.compile(r"([^\W\d_][\w'’-]*)(,? )(\w+)")


def opening_names(text: str, lang: str = ENGLISH) -> set[str]:
    """Stems of the words that open a sentence as the subject of a verb and may be names ("Carol is
    her boss."): what a summary names that way, its exchange must hold."""
    found = set()
    for match in _OPENING_SUBJECT_RE.finditer(text):
        word, gap, verb = match.groups()
        # In English only before a verb of a subject ("Tomatoes need sun" opens with no name); in
        # the other languages sentences open with an article or a capitalized noun, rarely with a
        # rare word that is not a name ("Roberto despidió", "Marie, la fille").
        subject = verb.casefold() in _SUBJECT_VERBS or (lang != ENGLISH and (gap == ", " or verb.islower()))
        if not word[0].isupper() or word.isupper() or not subject:
            continue
        stem = word_stem(word)
        if not is_sentence_initial(text, match.start()) or stem in NEVER_NAMES or "'" in word:
            continue
        plain = possessive_dropped(word.casefold())
        if may_be_a_name(stem, lang) and may_be_a_name(plain, lang) and not is_common_noun(word, lang):
            found.add(stem)
    return found
