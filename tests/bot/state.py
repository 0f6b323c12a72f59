"""What bot tests set up and read back beside Discord: the bot started with settings of its own,
channel bindings, the message log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import select

from bot.runtime import Runtime
from models import Message, Personality
from testkit.fake_discord import CHANNEL, GUILD

# The `start_bot` fixture: start the shipped bot with these settings changed; returns the bot.
StartBot = Callable[..., Awaitable[Any]]


async def bind(
    runtime: Runtime, personality: Personality, channel: int = CHANNEL, *, dm: bool = False
) -> None:
    """Have the personality answer every message in this channel (a DM's, with `dm`)."""
    await runtime.bindings.bind(
        personality_id=personality.id,
        channel_id=str(channel),
        guild_id=None if dm else str(GUILD),
        user_id="1",
    )


async def rows(runtime: Runtime) -> list[Message]:
    """The message log, oldest first."""
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Message).order_by(Message.id))).all())
