"""A reply's prompt work on the card, off the event loop with a deadline: scanning a big lorebook and
fitting its active entries must never hold up the replies of every other user and personality.

The reply's prompt (memory.chat.reply_prompt) calls these two in place of `CardParts.of`
(memory.chat.prompt_card) and `build_context` (memory.chat.prompt). Each
runs in a worker thread; past its deadline the reply goes without the lorebook (logged). The thread is
not stopped (Python cannot), so the work it may still do is bounded too: at most MAX_ACTIVE_LORE active
entries reach the prompt, whose lore fitting recounts the system prompt once per entry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from memory.chat.prompt import BuiltContext, build_context
from memory.chat.prompt_card import CardParts

log = logging.getLogger(__name__)

LORE_DEADLINE_SECONDS = 2.0
# Preferred first; fitting 1,000 constant entries took ~22 s of one core, 100 take ~0.2 s.
MAX_ACTIVE_LORE = 100


async def card_parts_off_loop(
    card: Mapping[str, Any] | None,
    *,
    display_name: str,
    recent: Sequence[str],
    user: str,
    default_scan_depth: int,
    deadline: float = LORE_DEADLINE_SECONDS,
) -> CardParts:
    """CardParts.of in a worker thread, its active lore at most MAX_ACTIVE_LORE entries; past `deadline`
    seconds, the parts without the lorebook."""

    def parts(of: Mapping[str, Any] | None) -> CardParts:
        found = CardParts.of(
            of, display_name=display_name, recent=recent, user=user, default_scan_depth=default_scan_depth
        )
        if len(found.lore) > MAX_ACTIVE_LORE:
            log.info(
                "%d lore entries active for %s: the first %d kept",
                len(found.lore),
                display_name,
                MAX_ACTIVE_LORE,
            )
            return dataclasses.replace(found, lore=found.lore[:MAX_ACTIVE_LORE])
        return found

    try:
        return await asyncio.wait_for(asyncio.to_thread(parts, card), deadline)
    except TimeoutError:
        log.warning(
            "Scanning %s's lorebook took over %.1f s: this reply goes without it", display_name, deadline
        )
        return parts({k: v for k, v in card.items() if k != "character_book"} if card else None)


async def build_context_off_loop(deadline: float = LORE_DEADLINE_SECONDS, **arguments: Any) -> BuiltContext:
    """build_context (its keyword arguments) in a worker thread; past `deadline` seconds, built again
    without the card's lore (with no lore to leave out, waited for: a busy machine fails no reply)."""
    work = asyncio.ensure_future(asyncio.to_thread(lambda: build_context(**arguments)))
    try:
        return await asyncio.wait_for(asyncio.shield(work), deadline)
    except TimeoutError:
        card = arguments.get("card")
        if not isinstance(card, CardParts) or not card.lore:
            return await work
        log.warning(
            "Fitting %d lore entries took over %.1f s: this reply goes without them", len(card.lore), deadline
        )
        return build_context(**{**arguments, "card": dataclasses.replace(card, lore=())})
