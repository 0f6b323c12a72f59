"""A lorebook read and indexed once per version, not once per reply (issue 33: a card of 20,000 entries).

Every reply gets the stored card afresh (a new dict from PostgreSQL), so the book read from it is kept
here by content: a reply whose book equals a kept one (Python's own comparison, in C: a few ms for
20,000 entries) gets the kept `Lorebook`, and with it the `BookIndex` built for it. The index holds one
Aho-Corasick automaton over every plain key of the book and, for each key, the entries it names, so a
reply looks at the entries whose keys occur in its text (and those with regex keys, and the constant
ones), never at every entry of the book.
"""

from __future__ import annotations

import copy
import marshal
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import ahocorasick

from memory.owners.lore_scan import LoreEntry, LoreScan, plain_needles

T = TypeVar("T")

# Books kept (each with its index): the personalities replying most recently.
KEPT_BOOKS = 16


class IndexedEntry(LoreEntry, Protocol):
    """What the index reads of an entry: what a scan reads, and its number and scan depth."""

    @property
    def number(self) -> int: ...
    @property
    def scan_depth(self) -> int | None: ...


class BookIndex:
    """The plain keys of a book's entries in one automaton, each key with the entries it names."""

    def __init__(self, entries: Iterable[IndexedEntry]) -> None:
        self.by_needle: dict[str, list[int]] = {}
        self.with_regex: set[int] = set()  # entries a regex key may activate: looked at every reply
        self.deepest: int | None = None  # the deepest scan an entry asks for itself
        self.book_depth = False  # whether an entry scans at the book's depth
        for entry in entries:
            for keys in (entry.keys, entry.secondary_keys):
                needles, has_regex = plain_needles(keys, entry.use_regex, entry.case_sensitive)
                for needle in needles:
                    self.by_needle.setdefault(needle, []).append(entry.number)
                if has_regex:
                    self.with_regex.add(entry.number)
            if entry.scan_depth is None:
                self.book_depth = True
            else:
                self.deepest = max(self.deepest or 0, entry.scan_depth)
        self.automaton: ahocorasick.Automaton | None = None
        if self.by_needle:
            self.automaton = ahocorasick.Automaton()
            for needle in self.by_needle:
                self.automaton.add_word(needle, needle)
            self.automaton.make_automaton()

    def widest_depth(self, book_depth: int) -> int:
        """How many of the newest messages the entries scan at most."""
        return max(self.deepest or 0, book_depth if self.book_depth else 0)

    def may_activate(self, scan: LoreScan, widest: int) -> set[int]:
        """The entries (by number) whose keys may be in this scan's text: every text an entry scans is
        part of the widest one (its newest messages, then the recursion text), as written or lower-cased."""
        numbers = set(self.with_regex)
        for case_sensitive in (True, False):
            text = scan.text(widest, case_sensitive=case_sensitive, recursion_only=False)
            for needle in scan.found(text).anywhere:
                numbers.update(self.by_needle[needle])
        return numbers


class KeptBooks:
    """What was made of a card's book, kept while the book stays the same: found by comparing the book
    with the kept ones of the same size (a copy is kept, so a caller changing its dict changes nothing)."""

    def __init__(self, size: int = KEPT_BOOKS) -> None:
        self._size = size
        self._kept: list[tuple[int, Mapping[str, Any], Any]] = []  # most recently used first
        self._lock = threading.Lock()  # replies read their cards in worker threads, several at once

    def get(self, book: Mapping[str, Any], make: Callable[[], T]) -> T:
        entries = book.get("entries")
        size = len(entries) if isinstance(entries, Sequence) else -1
        with self._lock:
            for at, (kept_size, raw, made) in enumerate(self._kept):
                if kept_size == size and raw == book:
                    self._kept.insert(0, self._kept.pop(at))
                    return made  # type: ignore[no-any-return]
        made = make()  # outside the lock: a big book's reading holds up no other personality's reply
        kept = (size, _copy(book), made)
        with self._lock:
            self._kept.insert(0, kept)
            del self._kept[self._size :]
        return made


def _copy(book: Mapping[str, Any]) -> Mapping[str, Any]:
    """A deep copy of a book read from JSON; marshal copies such a tree ~10 times as fast as deepcopy."""
    try:
        return cast(Mapping[str, Any], marshal.loads(marshal.dumps(cast(Any, book))))
    except ValueError:  # a value marshal cannot write (not from JSON)
        return copy.deepcopy(book)
