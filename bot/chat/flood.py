"""Flood control for chat: at most a number of messages per user within a window (discord.py's
cooldown buckets, keyed by author), and one notice per window telling the user how long to wait. The
cog stores a refused message as refused (memory.chat.refused): never answered later, never a memory."""

from __future__ import annotations

from dataclasses import dataclass

import discord
from discord.ext import commands


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message over the limit: how long until the next one is accepted, and whether to say so."""

    retry_after: float
    notify: bool


class FloodControl:
    """`messages` per user within `seconds`; a refused user is told once per window, not every time."""

    def __init__(self, messages: int, seconds: float) -> None:
        self._messages = commands.CooldownMapping.from_cooldown(messages, seconds, commands.BucketType.user)
        # One notice per window: its own bucket lets one through per `seconds` and refuses the rest.
        self._notices = commands.CooldownMapping.from_cooldown(1, seconds, commands.BucketType.user)

    def hit(self, message: discord.Message) -> Refusal | None:
        """Count the message against its author; None when it is within the limit."""
        retry_after = self._messages.update_rate_limit(message)
        if retry_after is None:
            return None
        return Refusal(retry_after, notify=self._notices.update_rate_limit(message) is None)


def flood_notice(user_name: str, retry_after: float) -> str:
    return (
        f"{user_name}, you're sending messages a little fast; "
        f"please wait {retry_after:.0f} s before the next one."
    )
