"""The 📝 a remembered user message gets: wherever its memory was formed (after a reply, in the
catch-up of missed messages, or in the periodic pass over pending work). Best-effort: a message
deleted meanwhile or a missing permission changes nothing but the reaction."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import discord

log = logging.getLogger(__name__)


async def react_remembered(client: discord.Client, remembered: Iterable[tuple[str, str]], emoji: str) -> int:
    """React with `emoji` to each (channel id, message id); returns how many reactions were added.

    Only Discord ids are reacted to (imported transcripts have ids of their own); the partial message
    needs no cache, so this works before the gateway is ready too."""
    added = 0
    if not emoji:
        return added
    for channel_id, message_id in remembered:
        if not (channel_id.isdigit() and message_id.isdigit()):
            continue
        target = client.get_partial_messageable(int(channel_id)).get_partial_message(int(message_id))
        try:
            await target.add_reaction(emoji)
        except discord.HTTPException as exc:
            log.debug("Could not react to %s in %s: %s", message_id, channel_id, exc)
        else:
            added += 1
    return added
