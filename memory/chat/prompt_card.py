"""What a character card adds to a prompt besides its system prompt, as SillyTavern places it: its lore
before and after the character's definition (the entries that fit the lore budget, most preferred
first) or at a depth of the history, its depth prompt there too, and its post-history instructions
(memory.chat.prompt puts them in the prompt)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.formation.cleaning import strip_chat_template_tokens
from memory.owners.card_prompt import DepthPrompt, card_chat, fill_chat_macros
from memory.owners.lore import ActiveLore, Position, match_lore, read_lorebook

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CardParts:
    """What a character card adds to a prompt besides the system prompt, macros already filled."""

    lore: Sequence[ActiveLore] = ()  # active entries, most preferred first (memory.owners.lore)
    lore_token_budget: int | None = None  # the book's own cap, within the lore share
    depth_prompt: DepthPrompt | None = None
    post_history_instructions: str = ""

    @classmethod
    def of(
        cls,
        card: Mapping[str, Any] | None,
        *,
        display_name: str,
        recent: Sequence[str],
        user: str,
        default_scan_depth: int,
    ) -> CardParts:
        """The parts of a personality's stored card (`personalities.card`) for a reply to `recent`
        (the conversation's messages, newest last) to `user`: its active lore, depth prompt and
        post-history instructions, their macros filled."""
        chat = card_chat(card, display_name)
        book = read_lorebook(card)
        note = chat.depth_prompt
        return cls(
            lore=match_lore(book, recent, default_scan_depth=default_scan_depth, char=chat.char, user=user),
            lore_token_budget=book.token_budget,
            depth_prompt=(
                DepthPrompt(fill_chat_macros(note.text, char=chat.char, user=user), note.depth, note.role)
                if note is not None
                else None
            ),
            post_history_instructions=fill_chat_macros(
                chat.post_history_instructions, char=chat.char, user=user
            ),
        )


def with_lore(base: str, entries: Sequence[ActiveLore]) -> str:
    """The system prompt with the lore placed before and after it, each side by insertion order."""

    def block(position: Position) -> str:
        placed = sorted(
            (lore for lore in entries if lore.entry.position is position),
            key=lambda lore: (lore.entry.insertion_order, lore.entry.number),
        )
        return "\n".join(strip_chat_template_tokens(lore.text).strip() for lore in placed)

    return "\n\n".join(part for part in (block(Position.BEFORE), base, block(Position.AFTER)) if part)


def fit_lore(
    base: str, lore: Sequence[ActiveLore], room: int, count: Callable[[list[dict[str, str]]], int]
) -> tuple[list[ActiveLore], int]:
    """The active entries that fit in `room` tokens, in their order of preference until one does not
    (SillyTavern's budget), and their tokens: each counted alone, then the prompt once (issue 33)."""
    empty, system = count([{"role": "system", "content": ""}]), count([{"role": "system", "content": base}])
    costs: list[int] = []
    for entry in lore:
        depth = entry.entry.position is Position.DEPTH
        text = entry.text if depth else strip_chat_template_tokens(entry.text).strip()
        costs.append(count([{"role": entry.entry.role if depth else "system", "content": text}]))
        costs[-1] += 0 if depth else 1 - empty  # its newline, without a message's own tokens
        if sum(costs) > room:
            costs.pop()
            log.debug("Lore budget (%d tokens) full: %d entries left out", room, len(lore) - len(costs))
            break
    while True:  # tokens can merge across the lines joined: what they take together, exactly
        chosen = list(lore[: len(costs)])
        placed = [e for e in chosen if e.entry.position is not Position.DEPTH]
        used = sum(c for e, c in zip(chosen, costs, strict=True) if e.entry.position is Position.DEPTH)
        used += count([{"role": "system", "content": with_lore(base, placed)}]) - system if placed else 0
        if used <= room or not costs:
            return chosen, used
        costs.pop()


def at_depth(
    history: list[dict[str, str]], inserts: Sequence[tuple[int, dict[str, str]]]
) -> list[dict[str, str]]:
    """The history with each (depth, message) put `depth` messages before its end (0: after the
    newest; deeper than the history: before the oldest kept). Messages of one depth and role are one."""
    merged: dict[tuple[int, str], dict[str, str]] = {}
    for depth, message in inserts:
        key = (min(depth, len(history)), message["role"])
        if key in merged:
            merged[key] = {**merged[key], "content": merged[key]["content"] + "\n" + message["content"]}
        else:
            merged[key] = message
    placed = list(history)
    for (depth, _), message in sorted(merged.items(), key=lambda item: item[0][0]):
        placed.insert(len(placed) - depth - sum(1 for d, _ in merged if d < depth), message)
    return placed
