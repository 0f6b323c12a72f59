"""A card's lorebook capped on the way in, as `lore add` caps it (memory.owners.lore.MAX_ENTRIES): every
reply scans the book, so its size is work on every reply."""

from __future__ import annotations

from typing import Any

from memory.owners.lore import MAX_ENTRIES


def cap_lorebook(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The card's body with at most MAX_ENTRIES lorebook entries (the first ones, the book's order), and
    how many were left out."""
    book = body.get("character_book")
    if not isinstance(book, dict):
        return body, 0
    entries = book.get("entries")
    if not isinstance(entries, list) or len(entries) <= MAX_ENTRIES:
        return body, 0
    capped = {**body, "character_book": {**book, "entries": entries[:MAX_ENTRIES]}}
    return capped, len(entries) - MAX_ENTRIES
