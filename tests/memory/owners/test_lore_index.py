"""Issue 33, item 2: a lorebook is read and indexed once per version, not once per reply. Every reply gets
the card afresh from PostgreSQL (a new dict); a book equal to one read before is not read again, a
changed one is, and nothing a caller does to its dict afterwards changes what was kept."""

from __future__ import annotations

import json
from typing import Any

from memory.owners.lore import match_lore, read_lorebook


def card(*entries: dict[str, Any], depth: int = 2) -> dict[str, Any]:
    return {"character_book": {"entries": list(entries), "scan_depth": depth, "recursive_scanning": True}}


def as_stored(value: dict[str, Any]) -> dict[str, Any]:
    """The card as a reply reads it: decoded from its JSON, a new dict every time."""
    decoded: dict[str, Any] = json.loads(json.dumps(value))
    return decoded


def active(book_card: dict[str, Any], *recent: str) -> list[str]:
    book = read_lorebook(book_card)
    return [lore.text for lore in match_lore(book, list(recent), default_scan_depth=2, char="K", user="U")]


def test_the_same_book_is_read_once_and_a_changed_one_again() -> None:
    written = card({"keys": ["harbor"], "content": "The harbor froze."})
    first = read_lorebook(as_stored(written))
    assert read_lorebook(as_stored(written)) is first  # its index with it: built once
    changed = card({"keys": ["harbour"], "content": "The harbor froze."})
    assert read_lorebook(as_stored(changed)) is not first
    assert active(as_stored(changed), "the harbour") == ["The harbor froze."]
    assert active(as_stored(written), "the harbour") == []


def test_a_dict_changed_after_it_was_read_changes_nothing_kept() -> None:
    stored = as_stored(card({"keys": ["lantern"], "content": "The lantern is blue."}))
    assert active(stored, "a lantern") == ["The lantern is blue."]
    stored["character_book"]["entries"][0]["keys"] = ["candle"]  # the same dict, edited in place
    assert active(stored, "a candle") == ["The lantern is blue."]
    assert active(stored, "a lantern") == []


def test_only_entries_whose_keys_occur_are_looked_at_yet_every_rule_holds() -> None:
    """The index hands match_lore the entries whose keys occur anywhere in the widest text scanned; each
    entry's own depth, case, whole-word rule and recursion still decide."""
    book = card(
        {"keys": ["ember"], "content": "Ember is a fox.", "extensions": {"scan_depth": 1}},
        {"keys": ["Rome"], "content": "Rome, as written.", "case_sensitive": True},
        {"keys": ["fox"], "content": "Foxes guard the gate.", "extensions": {"delay_until_recursion": True}},
        {"keys": ["gate"], "content": "The gate is old.", "extensions": {"exclude_recursion": True}},
        {"keys": ["/tow(er|n)/i"], "content": "A regex key."},
        {"keys": ["owl"], "content": "Always here.", "constant": True},
        depth=3,
    )
    # "ember" is two messages back, past its own depth of 1; "rome" is not "Rome"; "towns" matches.
    # (Three messages, fewer than the depth: all are scanned; a depth past them used to scan the newest.)
    assert active(as_stored(book), "ember", "rome", "many towns") == ["A regex key.", "Always here."]
    # Ember activates; its text names the fox, which activates only by recursion; the gate never does.
    assert active(as_stored(book), "Rome", "ember") == [
        "Ember is a fox.",
        "Rome, as written.",
        "Foxes guard the gate.",
        "Always here.",
    ]
