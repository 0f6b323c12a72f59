"""The words facts are made of: how common a word is, its stem, and the words that are never names.

Shared by the fact checks (memory.formation.fidelity and the modules it reads names and quantities
with) and the attribution check (pure, no I/O).
"""

from __future__ import annotations

import functools
import re

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
