"""Editing a personality's lorebook (memory.owners.lore): `LoreService` lists, adds, edits, enables
and disables entries for its managers, writing them in the card's own shape (`apply_changes`), so the
book exports back whole; a personality made without a card gets a book with its first entry.
`typed_changes` reads an entry's options as the CLI and /personality lore take them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import storable_text
from memory.errors import InvalidInputError, NotFoundError
from memory.owners.card_prompt import depth_of
from memory.owners.lore import (
    DEFAULT_ORDER,
    MAX_CONTENT_CHARS,
    MAX_ENTRIES,
    MAX_KEY_CHARS,
    MAX_KEYS,
    Logic,
    Lorebook,
    LoreEntry,
    Position,
    read_entry,
    read_lorebook,
    split_keys,
)
from memory.owners.lore_scan import MAX_PATTERN_CHARS, is_regex_key, key_pattern
from memory.owners.personalities import PersonalityService
from models import Personality


@dataclass(frozen=True)
class LoreChanges:
    """What an entry added or edited gets; None leaves a field as it is (on a new entry: its default)."""

    keys: Sequence[str] | None = None
    content: str | None = None
    secondary_keys: Sequence[str] | None = None
    logic: Logic | None = None
    constant: bool | None = None
    position: Position | None = None
    depth: int | None = None
    order: int | None = None
    priority: int | None = None
    case_sensitive: bool | None = None
    use_regex: bool | None = None
    comment: str | None = None


# The words the CLI and /personality lore take for positions and logics.
POSITION_WORDS = {"before": Position.BEFORE, "after": Position.AFTER, "depth": Position.DEPTH}
LOGIC_WORDS = {logic.name.lower().replace("_", "-"): logic for logic in Logic}


def typed_changes(
    *,
    keys: str | None = None,
    secondary_keys: str | None = None,
    logic: str | None = None,
    position: str | None = None,
    depth: int | None = None,
    **fields: Any,
) -> LoreChanges:
    """Changes as a user types them: keys as one comma-separated line, the position and the logic by
    their words (POSITION_WORDS, LOGIC_WORDS); a depth without a position places the entry there."""
    return LoreChanges(
        keys=split_keys(keys) if keys is not None else None,
        secondary_keys=split_keys(secondary_keys) if secondary_keys is not None else None,
        logic=LOGIC_WORDS[logic] if logic else None,
        position=POSITION_WORDS[position] if position else (Position.DEPTH if depth is not None else None),
        depth=depth,
        **fields,
    )


def _new_entry(entries: Sequence[Any]) -> dict[str, Any]:
    """A blank entry in the card's shape, with the next free id (SillyTavern numbers its entries)."""
    ids = [e["id"] for e in entries if isinstance(e, Mapping) and isinstance(e.get("id"), int)]
    return {
        "id": max(ids, default=len(entries) - 1) + 1,
        "keys": [],
        "secondary_keys": [],
        "content": "",
        "extensions": {},
        "enabled": True,
        "insertion_order": DEFAULT_ORDER,
        "case_sensitive": False,
        "use_regex": False,
        "constant": False,
        "selective": False,
        "position": Position.BEFORE.value,
        "comment": "",
    }


def _checked_keys(keys: Sequence[str], what: str) -> list[str]:
    cleaned = [storable_text(key.strip()) for key in keys if key.strip()]
    if len(cleaned) > MAX_KEYS:
        raise InvalidInputError(f"An entry has at most {MAX_KEYS} {what}; give fewer.")
    long = next((key for key in cleaned if len(key) > MAX_KEY_CHARS), None)
    if long is not None:
        raise InvalidInputError(f"The key {long[:40]!r}... is over {MAX_KEY_CHARS} characters; shorten it.")
    return cleaned


def apply_changes(raw: Mapping[str, Any], changes: LoreChanges) -> dict[str, Any]:
    """The entry with the changes written in the card's fields (and SillyTavern's extensions)."""
    entry = dict(raw)
    extensions = dict(entry["extensions"]) if isinstance(entry.get("extensions"), Mapping) else {}
    if changes.keys is not None:
        entry["keys"] = _checked_keys(changes.keys, "keys")
    if changes.secondary_keys is not None:
        entry["secondary_keys"] = _checked_keys(changes.secondary_keys, "secondary keys")
        entry["selective"] = bool(entry["secondary_keys"])
    if changes.content is not None:
        if len(changes.content) > MAX_CONTENT_CHARS:
            raise InvalidInputError(f"The text is over {MAX_CONTENT_CHARS:,} characters; shorten it.")
        entry["content"] = storable_text(changes.content.strip())
    if changes.logic is not None:
        extensions["selectiveLogic"] = int(changes.logic)
    if changes.position is not None:
        entry["position"] = (
            Position.BEFORE.value if changes.position is Position.BEFORE else Position.AFTER.value
        )
        extensions["position"] = {Position.BEFORE: 0, Position.AFTER: 1, Position.DEPTH: 4}[changes.position]
    if changes.depth is not None:
        extensions["depth"] = depth_of(changes.depth)
    if changes.comment is not None:
        entry["comment"] = storable_text(changes.comment.strip())[:MAX_KEY_CHARS]
    for name, value in (
        ("constant", changes.constant),
        ("insertion_order", changes.order),
        ("priority", changes.priority),
        ("case_sensitive", changes.case_sensitive),
        ("use_regex", changes.use_regex),
    ):
        if value is not None:
            entry[name] = value
    entry["extensions"] = extensions
    read = read_entry(1, entry)
    if not read.content:
        raise InvalidInputError("A lore entry needs its text: what the model is told when it is active.")
    if not read.keys and not read.constant:
        raise InvalidInputError("A lore entry needs keys that activate it, unless it is constant.")
    broken = next(
        (
            k
            for k in (*read.keys, *read.secondary_keys)
            if is_regex_key(k, read) and key_pattern(k, read) is None
        ),
        None,
    )
    if broken is not None:
        raise InvalidInputError(
            f"The key {broken[:60]!r} is not a valid regular expression (at most {MAX_PATTERN_CHARS} "
            "characters); fix it, or turn regex off for this entry."
        )
    return entry


class LoreService:
    """List, add, edit, enable and disable a personality's lore entries; only its managers may.

    Entries are named by their number in the book (`LoreEntry.number`): entries are never removed
    (disabled instead), so a number names the same entry for good.
    """

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], personalities: PersonalityService
    ) -> None:
        self._sessionmaker = sessionmaker
        self._personalities = personalities

    async def book(self, name: str, *, actor: str | None) -> Lorebook:
        """The personality's lorebook (the lore is part of its prompt: its managers only)."""
        personality = await self._personalities.get(name)
        self._personalities.require_manager(personality, actor, "read its lore")
        return read_lorebook(personality.card)

    async def add(self, name: str, changes: LoreChanges, *, actor: str | None) -> LoreEntry:
        """A new entry at the end of the book (a book is made for a personality without one)."""

        def add_entry(entries: list[Any]) -> int:
            if len(entries) >= MAX_ENTRIES:
                raise InvalidInputError(f"A lorebook holds at most {MAX_ENTRIES} entries; edit one instead.")
            entries.append(apply_changes(_new_entry(entries), changes))
            return len(entries)

        return await self._change(name, actor, add_entry)

    async def edit(self, name: str, number: int, changes: LoreChanges, *, actor: str | None) -> LoreEntry:
        """Change what `changes` gives of entry `number`."""
        if changes == LoreChanges():
            raise InvalidInputError("Nothing to change: give at least one field to edit.")

        def edit_entry(entries: list[Any]) -> int:
            entries[number - 1] = apply_changes(_entry(entries, number), changes)
            return number

        return await self._change(name, actor, edit_entry)

    async def set_enabled(self, name: str, number: int, *, enabled: bool, actor: str | None) -> LoreEntry:
        """Enable or disable entry `number`: a disabled entry never reaches the prompt."""

        def switch(entries: list[Any]) -> int:
            entries[number - 1] = {**_entry(entries, number), "enabled": enabled}
            return number

        return await self._change(name, actor, switch)

    async def _change(self, name: str, actor: str | None, change: Callable[[list[Any]], int]) -> LoreEntry:
        personality = await self._personalities.get(name)
        self._personalities.require_manager(personality, actor)
        async with self._sessionmaker.begin() as session:
            row = await session.get(Personality, personality.id, with_for_update=True)
            if row is None:
                raise NotFoundError(f"No personality named {name!r}.")
            card = dict(row.card or {})
            held = card.get("character_book")
            book = dict(held) if isinstance(held, Mapping) else {"extensions": {}, "entries": []}
            entries = list(book["entries"]) if isinstance(book.get("entries"), list) else []
            number = change(entries)
            row.card = {**card, "character_book": {**book, "entries": entries}}
        return read_entry(number, entries[number - 1])


def _entry(entries: Sequence[Any], number: int) -> Mapping[str, Any]:
    if not 1 <= number <= len(entries) or not isinstance(entries[number - 1], Mapping):
        raise NotFoundError(f"There is no lore entry {number}; the lore list shows the entries' numbers.")
    return entries[number - 1]  # type: ignore[no-any-return]
