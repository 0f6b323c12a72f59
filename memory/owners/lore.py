"""A personality's lorebook: SillyTavern's World Info, a character card's `character_book`.

The book is kept as the card wrote it, in `personalities.card["character_book"]`, so it exports back
whole; a personality made without a card gets one when its first entry is added (editing it:
memory.owners.lore_editing).
`read_lorebook` reads it leniently (a value of the wrong type is the field's default, never an error
in a reply), and `match_lore` picks the entries a reply's prompt gets, as SillyTavern does:

- an entry whose keys appear in the newest messages (the entry's scan depth, else the book's, else the
  deployment's) is active; keys match whole words, case-insensitively, unless the entry says otherwise
  (`case_sensitive`, `extensions.match_whole_words`); a key with spaces matches as a phrase;
- with `selective` and secondary keys, the book's selective logic decides too (SillyTavern's
  `extensions.selectiveLogic`: AND ANY, NOT ALL, NOT ANY, AND ALL);
- `use_regex` (V3), or a key written `/pattern/flags` (SillyTavern), is a regular expression, run
  under a timeout per search and a time budget per reply; plain keys are found by one Aho-Corasick
  pass (memory.owners.lore_scan);
- `constant` entries are always active, `enabled: false` ones never;
- with `recursive_scanning`, the text of active entries activates others, for MAX_RECURSION_STEPS;
- V3 decorators at the start of an entry's text are removed from it; `@@activate`, `@@dont_activate`,
  `@@depth`, `@@role` and `@@scan_depth` are honoured.

The prompt (memory.chat.prompt) takes the active entries in order of preference (`priority`, then
`insertion_order`, higher first) within the lore budget and the book's `token_budget`, and places them
by `insertion_order`, before or after the character definition or at a depth of the history.
"""

from __future__ import annotations

import enum
import functools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.owners.card_prompt import DEFAULT_DEPTH, depth_of, fill_chat_macros, role_of
from memory.owners.lore_index import BookIndex, KeptBooks
from memory.owners.lore_scan import LoreScan, is_regex_key, key_pattern, plain_needle

log = logging.getLogger(__name__)

MAX_ENTRIES = 1000
MAX_KEYS = 100
MAX_KEY_CHARS = 200
MAX_CONTENT_CHARS = 50_000
MAX_RECURSION_STEPS = 3
DEFAULT_ORDER = 100
_DECORATOR = re.compile(r"^@@(@?)(\w+)[ \t]*(.*)$")
_DECORATORS_USED = ("activate", "dont_activate", "depth", "role", "scan_depth")
_read_books = KeptBooks()


class Position(enum.StrEnum):
    BEFORE = "before_char"
    AFTER = "after_char"
    DEPTH = "at_depth"


class Logic(enum.IntEnum):
    """How secondary keys combine with the primary ones (SillyTavern's numbering)."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


# SillyTavern's `extensions.position`: 0 before, 1 after the character, 4 at a depth; the others
# (the author's note and example messages, outlets) have no place here and go after the character.
_ST_POSITIONS = {0: Position.BEFORE, 1: Position.AFTER, 4: Position.DEPTH}


@dataclass(frozen=True)
class LoreEntry:
    """One entry as matching reads it; `number` is its place in the book (1 = first), what users name."""

    number: int
    keys: tuple[str, ...]
    content: str
    secondary_keys: tuple[str, ...] = ()
    enabled: bool = True
    constant: bool = False
    selective: bool = False
    logic: Logic = Logic.AND_ANY
    insertion_order: float = DEFAULT_ORDER
    priority: float | None = None
    case_sensitive: bool = False
    whole_words: bool = True
    use_regex: bool = False
    position: Position = Position.BEFORE
    depth: int = DEFAULT_DEPTH
    role: str = "system"
    scan_depth: int | None = None
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: bool = False
    forced: bool | None = None  # @@activate (True) or @@dont_activate (False)
    comment: str = ""

    @property
    def label(self) -> str:
        """How the entry is named in lists and logs: its comment, else its keys, else its text's start."""
        return self.comment or ", ".join(self.keys) or " ".join(self.content.split())[:40] or "(empty)"

    @property
    def activation(self) -> str:
        """What activates the entry, in a list: "always", or its keys with the secondary ones."""
        keys = "always" if self.constant else ", ".join(self.keys)
        if self.selective and self.secondary_keys:
            keys += f" ({self.logic.name.lower().replace('_', ' ')}: {', '.join(self.secondary_keys)})"
        return keys

    @property
    def placement(self) -> str:
        """Where the entry goes, in a list: "before", "after" or "depth N"."""
        if self.position is Position.DEPTH:
            return f"depth {self.depth}"
        return self.position.value.removesuffix("_char")


@dataclass(frozen=True)
class Lorebook:
    entries: tuple[LoreEntry, ...] = ()
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive: bool = False

    @functools.cached_property
    def candidates(self) -> dict[int, LoreEntry]:
        """The entries that may be active, by number: enabled, with a text, not `@@dont_activate`d."""
        return {e.number: e for e in self.entries if e.enabled and e.content and e.forced is not False}

    @functools.cached_property
    def always(self) -> tuple[LoreEntry, ...]:
        return tuple(e for e in self.candidates.values() if e.forced or e.constant)

    @functools.cached_property
    def index(self) -> BookIndex:  # once per book read, and a book is read once per version
        return BookIndex(self.candidates.values())


@dataclass(frozen=True)
class ActiveLore:
    """An entry a prompt gets, and why it is active; its text has the macros filled for `char` and
    `user` when read (a prompt takes the preferred few of 20,000 constant entries: ~0.2 s saved)."""

    entry: LoreEntry
    reason: str
    char: str
    user: str

    @functools.cached_property
    def text(self) -> str:
        return fill_chat_macros(self.entry.content, char=self.char, user=self.user)


# ----------------------------------------------------------------------------------- reading


def _bool(value: Any, default: bool = False) -> bool:
    return value if isinstance(value, bool) else default


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else max(0, int(number))


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):  # a few writers put one key, or a comma list, in a string
        return tuple(split_keys(value))
    if not isinstance(value, list):
        return ()
    return tuple(key.strip() for key in value if isinstance(key, str) and key.strip())


def _decorated(content: str) -> tuple[str, dict[str, str]]:
    """The content without its V3 decorators (`@@name value` lines at its start), and those decorators
    (the first of a name counts; a `@@@` fallback only when its decorator is not one used here)."""
    found: dict[str, str] = {}
    lines = content.split("\n")
    skipped = 0
    for line in lines:
        match = _DECORATOR.match(line.strip())
        if match is None:
            break
        skipped += 1
        fallback, name, value = match.groups()
        if not fallback or name in _DECORATORS_USED:
            found.setdefault(name, value.strip())
    return "\n".join(lines[skipped:]).strip(), found


def read_entry(number: int, raw: Mapping[str, Any]) -> LoreEntry:
    """One entry of a card's book; a field of the wrong type takes its default."""
    extensions = raw.get("extensions")
    ext: Mapping[str, Any] = extensions if isinstance(extensions, Mapping) else {}
    written = raw.get("content")
    content, decorators = _decorated(written if isinstance(written, str) else "")
    position = Position.AFTER if raw.get("position") == "after_char" else Position.BEFORE
    st_position = _count(ext.get("position"))
    if st_position is not None:
        position = _ST_POSITIONS.get(st_position, Position.AFTER)
    depth = depth_of(ext.get("depth"))
    if "depth" in decorators:
        position, depth = Position.DEPTH, depth_of(decorators["depth"])
    case_sensitive = raw.get("case_sensitive")
    if not isinstance(case_sensitive, bool):
        case_sensitive = ext.get("case_sensitive")
    logic = _count(ext.get("selectiveLogic"))
    forced = True if "activate" in decorators else False if "dont_activate" in decorators else None
    scan_depth = (
        depth_of(decorators["scan_depth"]) if "scan_depth" in decorators else _count(ext.get("scan_depth"))
    )
    return LoreEntry(
        number=number,
        keys=_strings(raw.get("keys", raw.get("key"))),
        content=content,
        secondary_keys=_strings(raw.get("secondary_keys")),
        enabled=_bool(raw.get("enabled"), True) and not _bool(raw.get("disable")),
        constant=_bool(raw.get("constant")),
        selective=_bool(raw.get("selective")),
        logic=Logic(logic) if logic in tuple(Logic) else Logic.AND_ANY,
        insertion_order=next(
            (n for n in map(_number, (raw.get("insertion_order"), raw.get("order"))) if n is not None),
            DEFAULT_ORDER,
        ),
        priority=_number(raw.get("priority")),
        case_sensitive=_bool(case_sensitive),
        whole_words=_bool(ext.get("match_whole_words"), True),
        use_regex=_bool(raw.get("use_regex")),
        position=position,
        depth=depth,
        role=role_of(decorators.get("role", ext.get("role"))),
        scan_depth=scan_depth,
        exclude_recursion=_bool(ext.get("exclude_recursion")),
        prevent_recursion=_bool(ext.get("prevent_recursion")),
        delay_until_recursion=_bool(ext.get("delay_until_recursion")),
        forced=forced,
        comment=next(
            (v.strip() for v in (raw.get("comment"), raw.get("name")) if isinstance(v, str) and v.strip()), ""
        ),
    )


def read_lorebook(card: Mapping[str, Any] | None) -> Lorebook:
    """The book of a stored card (`personalities.card`), empty when it has none; the same book as the
    last replies read is not read again (memory.owners.lore_index)."""
    book = (card or {}).get("character_book")
    if not isinstance(book, Mapping):
        return Lorebook()
    return _read_books.get(book, lambda: _read_book(book))


def _read_book(book: Mapping[str, Any]) -> Lorebook:
    raw_entries = book.get("entries")
    entries = [
        read_entry(number, raw)
        for number, raw in enumerate(raw_entries if isinstance(raw_entries, list) else [], start=1)
        if isinstance(raw, Mapping)
    ]
    return Lorebook(
        entries=tuple(entries),
        scan_depth=_count(book.get("scan_depth")),
        token_budget=_count(book.get("token_budget")) or None,
        recursive=_bool(book.get("recursive_scanning")),
    )


def unsupported_features(card: Mapping[str, Any] | None) -> list[str]:
    """SillyTavern lorebook features the book uses that Personae does without, as an import reports."""
    book = (card or {}).get("character_book")
    entries = book.get("entries") if isinstance(book, Mapping) else None
    found: dict[str, None] = {}
    for raw in entries if isinstance(entries, list) else []:
        ext = raw.get("extensions") if isinstance(raw, Mapping) else None
        if not isinstance(ext, Mapping):
            continue
        probability = _number(ext.get("probability"))
        if _bool(ext.get("useProbability"), True) and probability is not None and probability < 100:
            found["entry probability"] = None
        if isinstance(ext.get("group"), str) and ext["group"].strip():
            found["inclusion groups"] = None
        if any(_number(ext.get(name)) for name in ("sticky", "cooldown", "delay")):
            found["timed effects"] = None
        if _count(ext.get("position")) not in (None, *_ST_POSITIONS):
            found["author's note and outlet positions (placed after the character)"] = None
    return list(found)


def split_keys(text: str) -> list[str]:
    """Keys typed as one comma-separated line; a `/regex/flags` key keeps the commas inside it."""
    keys: list[str] = []
    for match in re.finditer(r"\s*(/(?:\\.|[^/\\\n])+/[a-z]*(?=\s*(?:,|$))|[^,]*)\s*(?:,|$)", text):
        key = match.group(1).strip()
        if key:
            keys.append(key)
    return keys


# ----------------------------------------------------------------------------------- matching


def _key_found(key: str, entry: LoreEntry, text: Callable[[bool], str], scan: LoreScan) -> bool:
    """Whether the key is in the text scanned; `text(case_sensitive)` gives that text."""
    if is_regex_key(key, entry):
        pattern = key_pattern(key, entry)
        # A regex runs on the text as written: its own flags say whether case counts.
        return pattern is not None and scan.search(pattern, text(True), key)
    found = scan.found(text(entry.case_sensitive))
    return found.has(plain_needle(key, entry), whole_words=entry.whole_words)


def _matching(entry: LoreEntry, scan: LoreScan, *, recursion_only: bool) -> str | None:
    """Why the entry's keys activate it in this scan, or None."""

    def text(case_sensitive: bool) -> str:
        return scan.text(entry.scan_depth, case_sensitive=case_sensitive, recursion_only=recursion_only)

    if not scan.may_match(entry, text(entry.case_sensitive)):
        return None  # none of its plain keys is in the text, and it has no regex key
    primary = next((k for k in entry.keys if _key_found(k, entry, text, scan)), None)
    if primary is None:
        return None
    if not (entry.selective and entry.secondary_keys):
        return f"key {primary!r}"
    found = [k for k in entry.secondary_keys if _key_found(k, entry, text, scan)]
    matched = {
        Logic.AND_ANY: bool(found),
        Logic.NOT_ALL: len(found) < len(entry.secondary_keys),
        Logic.NOT_ANY: not found,
        Logic.AND_ALL: len(found) == len(entry.secondary_keys),
    }[entry.logic]
    if not matched:
        return None
    if entry.logic in (Logic.AND_ANY, Logic.AND_ALL):
        return f"key {primary!r} with {', '.join(repr(k) for k in found)}"
    return f"key {primary!r} without {'all of ' if entry.logic is Logic.NOT_ALL else ''}the secondary keys"


def match_lore(
    book: Lorebook, recent: Sequence[str], *, default_scan_depth: int, char: str, user: str
) -> list[ActiveLore]:
    """The book's active entries for a reply to `recent` (the conversation's messages, newest last),
    most preferred first: higher `priority`, then higher `insertion_order`, then the book's order."""
    depth = book.scan_depth if book.scan_depth is not None else default_scan_depth
    index = book.index
    scan = LoreScan(recent, depth, index.automaton)
    widest = index.widest_depth(depth)
    active: dict[int, tuple[LoreEntry, str]] = {
        e.number: (e, "decorator @@activate" if e.forced else "constant") for e in book.always
    }
    # Only the entries whose keys the automaton found anywhere in the text are looked at, in book order.
    for number in sorted(index.may_activate(scan, widest)):
        entry = book.candidates[number]
        if number in active or entry.delay_until_recursion:
            continue
        if reason := _matching(entry, scan, recursion_only=False):
            active[number] = (entry, reason)
    if book.recursive:
        fed: set[int] = set()
        for _ in range(MAX_RECURSION_STEPS):
            feeding = [e for n, (e, _) in active.items() if n not in fed and not e.prevent_recursion]
            if not feeding:
                break
            fed.update(e.number for e in feeding)
            scan.recursion.extend(e.content for e in feeding)
            for number in sorted(index.may_activate(scan, widest)):
                entry = book.candidates[number]
                if number in active or entry.exclude_recursion:
                    continue
                if reason := _matching(entry, scan, recursion_only=entry.delay_until_recursion):
                    active[number] = (entry, f"{reason} (in another entry's text)")
    if scan.timed_out:
        log.warning("Lore regex keys gave up (too slow): %s", ", ".join(repr(k) for k in scan.timed_out[:5]))
    ordered = sorted(
        active.values(),
        key=lambda item: (-(item[0].priority or 0.0), -item[0].insertion_order, item[0].number),
    )
    found = [ActiveLore(entry, reason, char, user) for entry, reason in ordered]
    if log.isEnabledFor(logging.DEBUG):  # a label per entry is work: 20,000 constant entries, ~60 ms
        for lore in found:
            log.debug("Lore entry %d (%s) is active: %s", lore.entry.number, lore.entry.label, lore.reason)
    return found
