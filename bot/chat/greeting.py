"""A character's greeting posted where a conversation with it begins: in a channel it was just activated
in (`/personality activate` dispatches bot.events.GREETING_EVENT, the chat cog posts it), and in a
first DM before its first answer. The greeting is stored first (memory.owners.greetings), so it is in
the model's context and never posted twice; it goes out through the same senders as replies, pinging
nobody."""

from __future__ import annotations

import logging

import discord

from bot.chat.senders import ReplySenders
from memory.owners.greetings import Greetings

log = logging.getLogger(__name__)


class ChannelGreeter:
    """Stores a personality's greeting for a new conversation and posts it as the personality."""

    def __init__(self, greetings: Greetings, senders: ReplySenders) -> None:
        self._greetings = greetings
        self._senders = senders

    async def greet(
        self,
        channel: discord.abc.Messageable,
        guild_id: str | None,
        personality_id: int,
        user: discord.abc.User,
    ) -> list[discord.Message]:
        """Greet `user` in `channel` (of the guild `guild_id`, None in a DM) if the personality has a
        greeting and the conversation there is new; the messages posted (none otherwise)."""
        greeting = await self._greetings.greet(
            personality_id=personality_id,
            guild_id=guild_id,
            channel_id=str(getattr(channel, "id", "")) or None,
            user_id=str(user.id),
            user_name=user.display_name,
        )
        if greeting is None:
            return []
        try:
            return await self._senders.send_as(
                channel, greeting.text, name=greeting.display_name, avatar_url=greeting.avatar_url
            )
        except discord.HTTPException as exc:
            # Stored, so the model still knows how the conversation opened; the answer goes on.
            log.warning("Could not post the greeting of conversation %s: %s", greeting.conversation_id, exc)
            return []
