"""What a card import reports: what of the card the personality uses, what it keeps only to export it
back, and what it could not keep (a lorebook's entries past the cap among them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from memory.owners.card_prompt import ComposedPrompt, card_chat
from memory.owners.lore import MAX_ENTRIES, read_lorebook, unsupported_features


class CardFields(Protocol):
    """What the report reads of memory.owners.cards.CardFields (named here: cards imports this module)."""

    name: str
    nickname: str
    character_book: dict[str, Any] | None
    extensions: dict[str, Any] | None
    assets: list[dict[str, Any] | None]

    @property
    def model_extra(self) -> dict[str, Any] | None: ...

    def model_dump(self) -> dict[str, Any]: ...


# The fields a card may bring that never reach the model (the specs keep them from it, or they serve
# a front-end): kept, and exported back.
_FOR_PEOPLE = {
    "creator_notes": "creator notes",
    "creator_notes_multilingual": "translated creator notes",
    "tags": "tags",
    "creator": "creator",
    "character_version": "character version",
    "group_only_greetings": "group-only greetings",
    "source": "source",
    "creation_date": "creation date",
    "modification_date": "modification date",
}
# Assets whose data lives outside the card's JSON (in a CHARX archive or extra PNG chunks).
_EMBEDDED = ("embeded://", "embedded://", "__asset:")


@dataclass(frozen=True)
class CardReport:
    """What an import uses, what it keeps only to export it back, and what it could not keep."""

    used: list[str]
    unused: list[str]
    not_kept: list[str]

    def lines(self) -> list[str]:
        """The report as a few short lines, for the CLI and Discord."""
        lines = [f"uses:     {', '.join(self.used)}"]
        if self.unused:
            lines.append(f"not used: {', '.join(self.unused)} (kept; exported back)")
        if self.not_kept:
            lines.append(f"not kept: {', '.join(self.not_kept)}")
        return lines


def _plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


def _empty(value: Any) -> bool:
    return value is None or value in ("", [], {})


def card_report(f: CardFields, prompt: ComposedPrompt, *, lore_dropped: int = 0) -> CardReport:
    """What of the card the personality uses, and what it does not (CardReport)."""
    used = [
        label
        for field, label in (
            ("system_prompt", "system prompt"),
            ("description", "description"),
            ("personality", "personality"),
            ("scenario", "scenario"),
        )
        if getattr(f, field).strip()
    ]
    if prompt.examples:
        used.append(
            f"{prompt.examples_kept} of {_plural(prompt.examples, 'example dialogue')}"
            if prompt.examples_left_out
            else _plural(prompt.examples, "example dialogue")
        )
    chat = card_chat(f.model_dump(), f.name)
    if chat.greetings:
        used.append(
            "greeting"
            + (f" (+{_plural(len(chat.greetings) - 1, 'alternate')})" if len(chat.greetings) > 1 else "")
        )
    book = read_lorebook({"character_book": f.character_book})
    unused = [label for field, label in _FOR_PEOPLE.items() if not _empty(getattr(f, field))]
    if book.entries:
        disabled = sum(not e.enabled for e in book.entries)
        used.append(
            f"lorebook ({_plural(len(book.entries), 'entry', 'entries')}"
            + (f", {disabled} disabled)" if disabled else ")")
        )
        unused += [f"lorebook {feature}" for feature in unsupported_features(f.model_dump())]
    if chat.post_history_instructions.strip():
        used.append("post-history instructions")
    if chat.depth_prompt is not None:
        used.append(f"depth prompt (depth {chat.depth_prompt.depth})")
    if f.nickname.strip():
        used.append(f"nickname {f.nickname.strip()!r}")
    others = sorted(k for k in (f.extensions or {}) if k != "depth_prompt")
    if others:
        unused.append("extensions " + ", ".join(others))
    extras = sorted(f.model_extra or {})
    if extras:
        unused.append("other fields " + ", ".join(extras))
    not_kept = [
        f"asset {a.get('type', '?')}/{a.get('name', '?')} ({str(a.get('uri'))[:60]}): its file is not stored"
        for a in f.assets
        if isinstance(a, dict) and str(a.get("uri", "")).startswith(_EMBEDDED)
    ]
    if lore_dropped:
        not_kept.append(
            f"lorebook entries past the first {MAX_ENTRIES:,} ({lore_dropped:,}: a lorebook holds at most "
            f"{MAX_ENTRIES:,}, as `lore add` allows)"
        )
    kept_assets = len(f.assets) - len(not_kept)
    if kept_assets:
        unused.append(_plural(kept_assets, "asset link"))
    return CardReport(used=used or ["the default prompt"], unused=unused, not_kept=not_kept)
