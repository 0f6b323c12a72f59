"""A card's parts for one reply (its active lore above all), worked out off the event loop with a
deadline: scanning a big lorebook must never hold up the replies of every other user and personality."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from memory.chat.prompt import CardParts

log = logging.getLogger(__name__)

# Past this the reply goes without the book's entries (its regex keys alone are bounded at 0.2 s by
# memory.owners.lore_scan; a 1,000-entry book of plain keys takes milliseconds).
LORE_DEADLINE_SECONDS = 2.0


async def card_parts_off_loop(
    card: Mapping[str, Any] | None,
    *,
    display_name: str,
    recent: Sequence[str],
    user: str,
    default_scan_depth: int,
    deadline: float = LORE_DEADLINE_SECONDS,
) -> CardParts:
    """CardParts.of in a worker thread; past `deadline` seconds, the parts without the lorebook (logged).
    The thread is not stopped (Python cannot), but nothing waits for it."""

    def parts(of: Mapping[str, Any] | None) -> CardParts:
        return CardParts.of(
            of, display_name=display_name, recent=recent, user=user, default_scan_depth=default_scan_depth
        )

    try:
        return await asyncio.wait_for(asyncio.to_thread(parts, card), deadline)
    except TimeoutError:
        log.warning(
            "The lorebook of %s took over %.1f s to scan: this reply goes without it", display_name, deadline
        )
        return parts({k: v for k, v in card.items() if k != "character_book"} if card else None)
