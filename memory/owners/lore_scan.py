"""One reply's scan of a lorebook: which keys occur in the newest messages, with the work bounded.

Plain keys are found by one Aho-Corasick pass over each text scanned (pyahocorasick: a C automaton
over every key of the book at once, built once per version of the book, memory.owners.lore_index), not
by a search per key and entry: a card's 9,000 entries of 30 keys used to cost ~13 s of every reply.
Regex keys (`use_regex`, or `/pattern/flags`) run with the `regex` package under a timeout per search
and a budget per reply, so a pattern that backtracks forever costs a fraction of a second and matches
nothing.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from typing import Protocol

import ahocorasick
import regex


class LoreEntry(Protocol):
    """What a scan reads of an entry (memory.owners.lore.LoreEntry, which imports this module)."""

    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def secondary_keys(self) -> tuple[str, ...]: ...
    @property
    def use_regex(self) -> bool: ...
    @property
    def case_sensitive(self) -> bool: ...


MAX_SCAN_DEPTH = 100
MAX_PATTERN_CHARS = 1000
# A search that takes longer is given up (no match); so is every regex key once a reply's scan has
# spent REGEX_SCAN_SECONDS on them, however many entries the book has.
REGEX_TIMEOUT_SECONDS = 0.02
REGEX_SCAN_SECONDS = 0.2
_REGEX_KEY = re.compile(r"^/(.+)/([a-z]*)$", re.DOTALL)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> regex.Pattern[str] | None:
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        return regex.compile(pattern, flags)
    except (regex.error, ValueError, OverflowError, RecursionError):
        return None


def key_pattern(key: str, entry: LoreEntry) -> regex.Pattern[str] | None:
    """The regular expression a regex key stands for; None for a plain key, and for a broken pattern
    (which matches nothing, as the V3 specification requires)."""
    written = _REGEX_KEY.match(key)
    if written is not None:
        pattern, letters = written.groups()
        flags = (regex.IGNORECASE if "i" in letters else 0) | (regex.DOTALL if "s" in letters else 0)
        flags |= regex.MULTILINE if "m" in letters else 0
        return _compiled(pattern, flags)
    if entry.use_regex:
        return _compiled(key, 0 if entry.case_sensitive else regex.IGNORECASE)
    return None


def is_regex_key(key: str, entry: LoreEntry) -> bool:
    return entry.use_regex or _REGEX_KEY.match(key) is not None


def plain_needle(key: str, entry: LoreEntry) -> str:
    """What a plain key is looked for as: lower-cased unless the entry is case-sensitive."""
    return key if entry.case_sensitive else key.lower()


@functools.lru_cache(maxsize=8192)
def plain_needles(
    keys: tuple[str, ...], use_regex: bool, case_sensitive: bool
) -> tuple[frozenset[str], bool]:
    """Keys' plain ones as looked for, and whether one is a regex (kept for the books in use)."""
    if use_regex:
        return frozenset(), bool(keys)
    plain = [k for k in keys if not _REGEX_KEY.match(k)]
    return frozenset(k if case_sensitive else k.lower() for k in plain), len(plain) < len(keys)


def _is_word_char(text: str, at: int) -> bool:
    # As `re`'s \w: letters, digits and the underscore (str.isalnum covers Unicode letters and digits).
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


class KeysFound:
    """The plain keys of a book that occur in one text: anywhere, and as whole words (no letter, digit
    or underscore just before or after, as `(?:^|\\W)key(?:$|\\W)` finds them)."""

    def __init__(self, automaton: ahocorasick.Automaton | None, text: str) -> None:
        self.anywhere: set[str] = set()
        self.whole: set[str] = set()
        if automaton is None:
            return
        for end, needle in automaton.iter(text):
            self.anywhere.add(needle)
            if not _is_word_char(text, end - len(needle)) and not _is_word_char(text, end + 1):
                self.whole.add(needle)

    def has(self, needle: str, *, whole_words: bool) -> bool:
        if whole_words and not any(c.isspace() for c in needle):
            return needle in self.whole
        return needle in self.anywhere


class LoreScan:
    """One reply's scan: the texts scanned, the plain keys found in each, and the time its regex keys
    may still take."""

    def __init__(
        self, recent: Sequence[str], default_depth: int, automaton: ahocorasick.Automaton | None
    ) -> None:
        self._recent = list(recent)
        self._default_depth = default_depth
        self._chat: dict[tuple[int, bool], str] = {}
        self._found: dict[str, KeysFound] = {}
        self._texts: dict[tuple[int | None, bool, bool, int], str] = {}
        self.recursion: list[str] = []  # the text of the entries that activate others
        self._deadline = time.monotonic() + REGEX_SCAN_SECONDS
        self.timed_out: list[str] = []
        self._automaton = automaton  # over every plain key of the book (memory.owners.lore_index)

    def text(self, depth: int | None, *, case_sensitive: bool, recursion_only: bool) -> str:
        """The newest `depth` messages (the book's depth when None), then the recursion text."""
        key = (depth, case_sensitive, recursion_only, len(self.recursion))
        if key not in self._texts:  # asked for by every key of every entry: joined once
            self._texts[key] = self._text(depth, case_sensitive=case_sensitive, recursion_only=recursion_only)
        return self._texts[key]

    def _text(self, depth: int | None, *, case_sensitive: bool, recursion_only: bool) -> str:
        depth = min(MAX_SCAN_DEPTH, depth if depth is not None else self._default_depth)
        if (depth, case_sensitive) not in self._chat:
            # Fewer messages than the depth: all of them (a negative start would take the newest only).
            joined = "\n".join(self._recent[max(0, len(self._recent) - depth) :] if depth else [])
            self._chat[(depth, case_sensitive)] = joined if case_sensitive else joined.lower()
        parts = [] if recursion_only else [self._chat[(depth, case_sensitive)]]
        parts += self.recursion if case_sensitive else [text.lower() for text in self.recursion]
        return "\n".join(parts)

    def may_match(self, entry: LoreEntry, text: str) -> bool:
        """False when the entry has no regex key and none of its plain keys occurs in the text at all:
        the automaton's one pass answers for it, with no search of its own."""
        needles, has_regex = plain_needles(entry.keys, entry.use_regex, entry.case_sensitive)
        return has_regex or not self.found(text).anywhere.isdisjoint(needles)

    def found(self, text: str) -> KeysFound:
        """The plain keys in this text, found in one pass and kept for the other entries scanning it."""
        if text not in self._found:
            self._found[text] = KeysFound(self._automaton, text)
        return self._found[text]

    def search(self, pattern: regex.Pattern[str], text: str, key: str) -> bool:
        left = self._deadline - time.monotonic()
        if left <= 0:
            self.timed_out.append(key)
            return False
        try:
            return pattern.search(text, timeout=min(REGEX_TIMEOUT_SECONDS, left)) is not None
        except TimeoutError:
            self.timed_out.append(key)
            return False
