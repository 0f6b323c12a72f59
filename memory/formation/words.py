"""The words facts are made of: how common a word is, its stem, and the words that are never names.

Shared by the fact checks (memory.formation.fidelity and the modules it reads names and quantities
with) and the attribution check (pure, no I/O).
"""

from __future__ import annotations

import functools
import re
from collections import Counter

# A word at least this frequent (zipf: log10 of uses per billion words) is a common word at a
# sentence's start, no name (tuned on bench.summaries' labelled sets); one at least DISTINCTIVE_ZIPF
# frequent, in a name of several words, is not what identifies it.
COMMON_ZIPF = 3.3
DISTINCTIVE_ZIPF = 4.5

# "Mr. Pike": a title's dot ends no sentence, and the title is no name of its own.
TITLES = frozenset({"mr", "mrs", "ms", "mx", "dr", "prof", "st", "sr", "jr", "mt"})
WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
# Never names, wherever they stand and however rare wordfreq finds them.
_NEVER_NAMES_TEXT = """i i'm i've i'll i'd user assistant ok okay lol lmao rofl haha hehe hah xd uwu owo omg
    omfg hmm hmmm aww awww ooh oooh ohh ugh yay yayy woohoo wooo yeah yess yesss nope nah pls plz thx
    ty tbh idk imo imho btw brb gg ikr smh ngl fr rn lmk np congrats bye oof whoa woah yikes welp"""
NEVER_NAMES = frozenset(_NEVER_NAMES_TEXT.split()) | TITLES


# The languages whose words, numbers and dates the checks read beyond English. A text's language is
# told by its words' votes: each goes to the language where wordfreq finds it clearly most common.
ENGLISH = "en"
LANGUAGES = (ENGLISH, "de", "es", "fr")
VOTE_MARGIN = 1.0  # zipf: "Hund" votes German, "Martin" (common everywhere) votes nothing
_LATIN_WORD_RE = re.compile(r"[a-zà-ÿ]{2,}")


@functools.lru_cache(maxsize=65536)
def _vote(word: str) -> str | None:
    from wordfreq import zipf_frequency

    ranked = sorted(((zipf_frequency(word, lang), lang) for lang in LANGUAGES), reverse=True)
    (best, lang), (second, _) = ranked[0], ranked[1]
    return lang if best - second >= VOTE_MARGIN else None


# Asked before any vote: each language's word list costs ~40 MB once loaded, which plain English
# text (most of what the bot reads) should not pay. Another language is looked for only in a text
# with two words of letters English does not use or two of these frequent words of German, Spanish
# or French.
_FOREIGN_WORDS_TEXT = """der das und ist nicht ich eine mit auf für mein meine wir dem sie hat von
    sein bei ihr unser habe haben wird el los las que una mi por con para su del al muy tengo
    tiene hoy le les et est je du des pour avec mon ma mes nous vous pas il elle sont ont aux cette
    ai sa ses ce qui dans sur"""
_FOREIGN_WORDS = frozenset(_FOREIGN_WORDS_TEXT.split())
_ENGLISH_FUNCTION_WORDS_TEXT = "the and is was to of in my his her he she it for with on at a an i you"
_ENGLISH_FUNCTION_WORDS = frozenset(_ENGLISH_FUNCTION_WORDS_TEXT.split())
_FOREIGN_LETTERS_RE = re.compile(r"[à-öø-ÿ]")


# Or a text most of whose words English hardly uses ("unser team hat am sonntag vier zu eins").
FOREIGN_ZIPF = 3.0
FOREIGN_SHARE = 0.4


def _may_be_foreign(text: str) -> bool:
    words = _LATIN_WORD_RE.findall(text)
    accented = {w for w in words if _FOREIGN_LETTERS_RE.search(w)}
    # Two of them ("für", "Äpfel", "mon", "ses"), or one in a text with no English function word
    # ("Je joue au tennis chaque mardi"); "the café" is English.
    signs = len(accented) + sum(w in _FOREIGN_WORDS and w not in accented for w in words)
    english = sum(w in _ENGLISH_FUNCTION_WORDS for w in words)
    if signs >= 2 or (signs and not english):
        return True
    unknown = sum(zipf(w) < FOREIGN_ZIPF for w in words)
    return unknown >= 2 and unknown >= FOREIGN_SHARE * len(words)


def language(text: str, default: str = ENGLISH) -> str:
    """The language a text is written in, of LANGUAGES: the one most of its words vote for (at
    least two); `default` when none has two (a short summary is read in its exchange's language)."""
    text = text.casefold()
    if not _may_be_foreign(text):
        return ENGLISH if _LATIN_WORD_RE.search(text) and default == ENGLISH else default
    votes = Counter(v for w in _LATIN_WORD_RE.findall(text) if (v := _vote(w)) is not None)
    if not votes:
        return default
    (best, count), *rest = votes.most_common(2)
    if count < 2 or (rest and rest[0][1] == count):
        return default
    return best


def is_latin(text: str) -> bool:
    """Whether most letters of `text` are Latin ones (names can be compared by their spelling)."""
    letters = [c for c in text if c.isalpha()]
    latin = sum(c.isascii() or "\u00c0" <= c <= "\u024f" for c in letters)
    return not letters or latin * 2 >= len(letters)


@functools.lru_cache(maxsize=65536)
def zipf(word: str, lang: str = ENGLISH) -> float:
    """How common a word is in `lang`; a hyphenated one as its rarest part ("bubble-wrap" is common)."""
    if "-" in word:
        return min(zipf(part, lang) for part in word.split("-") if part) if word.strip("-") else 0.0
    # Imported on the first fact checked: wordfreq and its language data take ~0.3 s to load, which a
    # command that forms no memory (recall, the chat's start) should not pay.
    from wordfreq import zipf_frequency

    frequency: float = zipf_frequency(word, lang)
    return frequency if lang == ENGLISH else max(frequency, zipf(word))


# A capitalized German word at least this common in German, and this much more than in English, is
# a noun ("Kuchen", "Hund", "Bahnhof"), no name: names are about as common in both ("Lena", "Martin").
NOUN_ZIPF = 3.0
NOUN_MARGIN = 1.5


# German words that come before a noun, not a name: "mit dem Rad", "im Zoo", "unser Team".
_GERMAN_DETERMINERS_TEXT = """der die das den dem des ein eine einen einem einer eines im am zum zur vom
    beim ins mein meine meinem meinen meiner dein deine sein seine ihr ihre unser unsere euer jeder
    jede jedes kein keine diese dieser dieses"""
_GERMAN_DETERMINERS = frozenset(_GERMAN_DETERMINERS_TEXT.split())
_PREVIOUS_WORD_RE = re.compile(r"([^\W\d_]+)[ \t]+$")
# A long German word ending in a common noun is a compound of it ("Führerscheinprüfung").
COMPOUND_MIN_CHARS = 10
COMPOUND_TAIL_CHARS = 4


def previous_word(text: str, start: int) -> str:
    """The word just before position `start` on its line, case-folded ("" when none)."""
    match = _PREVIOUS_WORD_RE.search(text[max(0, start - 40) : start])
    return match.group(1).casefold() if match else ""


def is_common_noun(word: str, lang: str, previous: str = "") -> bool:
    """Whether a capitalized word is a German noun rather than a name: after a determiner, far more
    common in German than in English (see NOUN_ZIPF), or a compound ending in such a noun."""
    if lang != "de":
        return False
    if previous in _GERMAN_DETERMINERS:
        return True
    folded = possessive_dropped(word.casefold())
    if _german_noun(folded):
        return True
    if len(folded) >= COMPOUND_MIN_CHARS:
        tails = range(1, len(folded) - COMPOUND_TAIL_CHARS + 1)
        return any(zipf_frequency_de(folded[i:]) >= NOUN_ZIPF + 0.5 for i in tails)
    return False


def _german_noun(folded: str) -> bool:
    from wordfreq import zipf_frequency

    german = zipf_frequency(folded, "de")
    return german >= NOUN_ZIPF and german - zipf_frequency(folded, ENGLISH) >= NOUN_MARGIN


def zipf_frequency_de(word: str) -> float:
    from wordfreq import zipf_frequency

    frequency: float = zipf_frequency(word, "de")
    return frequency


def possessive_dropped(word: str) -> str:
    if word.endswith("'s"):
        return word[:-2]
    return word[:-1] if word.endswith("'") else word


def word_stem(word: str) -> str:
    """A word as facts compare it: case-folded, without its possessive or a plural's `s`."""
    word = possessive_dropped(word.casefold().replace("’", "'"))
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


@functools.lru_cache(maxsize=16384)
def verb_base(word: str) -> str:
    """An -ing or -ed form whose spelling changed as its verb ("sharing": share, "running": run,
    "planned": plan), by lemminflect's tables; any other word as it is. A prefix of the form then
    meets the verb's other forms ("share", "shares"), as it already does for "painting" and "paint"."""
    from memory.recall.word_forms import lemmas

    for suffix in ("ing", "ed"):
        bare = word.removesuffix(suffix)
        if bare == word or len(bare) < 2:
            continue
        found = lemmas(word)
        if bare + "e" in found:
            return bare + "e"
        if len(bare) > 2 and bare[-1] == bare[-2] and bare[:-1] in found:
            return bare[:-1]
    return word
