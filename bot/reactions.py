"""The 📝 a remembered user message gets: wherever its memory was formed (after a reply, in the
catch-up of missed messages, in the periodic pass over pending work, or by "Remember this").
Best-effort: a message deleted meanwhile or a missing permission changes nothing but the reaction."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import discord

log = logging.getLogger(__name__)


class RememberedReaction:
    """Reacts with the deployment's REMEMBERED_REACTION (none when it is empty) to remembered messages."""

    def __init__(self, client: discord.Client, emoji: str) -> None:
        self._client = client
        self.emoji = emoji

    async def add(self, remembered: Iterable[tuple[str, str]]) -> int:
        """React to each (channel id, message id); returns how many reactions were added.

        Only Discord ids are reacted to (imported transcripts have ids of their own); the partial
        message needs no cache, so this works before the gateway is ready too."""
        added = 0
        if not self.emoji:
            return added
        for channel_id, message_id in remembered:
            if not (channel_id.isdigit() and message_id.isdigit()):
                continue
            partial = self._client.get_partial_messageable(int(channel_id))
            try:
                await partial.get_partial_message(int(message_id)).add_reaction(self.emoji)
            except discord.HTTPException as exc:
                log.debug("Could not react to %s in %s: %s", message_id, channel_id, exc)
            else:
                added += 1
        return added
