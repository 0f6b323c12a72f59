"""Talking to the bot on dpytest's fake gateway: say something, wait for the work it spawned, read what
it sent and what it stored."""

from __future__ import annotations

from typing import Any

import discord
import discord.ext.test as dpytest
from discord.ext.test import backend, factories
from sqlalchemy import select

from bot.chat.catch_up import CATCH_UP_TASK
from bot.client import PersonaeBot
from models import Message, Personality


async def settle() -> None:
    """Wait for the after-reply work the bot spawned (the catch-up timer never ends on its own)."""
    client = dpytest.get_config().client
    assert isinstance(client, PersonaeBot)
    await client.background.drain(keep_running=(CATCH_UP_TASK,))


async def say(content: str, **kwargs: Any) -> discord.Message:
    """Send as a user and let the after-reply work finish, as a user would see it done."""
    message = await dpytest.message(content, **kwargs)
    await settle()
    return message


def sent_messages() -> list[discord.Message]:
    out = []
    while not dpytest.sent_queue.empty():
        out.append(dpytest.get_message())
    return out


async def bind(runtime: Any, personality: Personality, channel: Any) -> None:
    guild = getattr(channel, "guild", None)
    await runtime.bindings.bind(
        personality_id=personality.id,
        channel_id=str(channel.id),
        guild_id=str(guild.id) if guild else None,
        user_id="1",
    )


async def rows(runtime: Any) -> list[Message]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Message).order_by(Message.id))).all())


def raw_message(content: str, channel: Any, author: Any, **extra: Any) -> discord.Message:
    """A message dpytest can't build itself (a reply, a webhook post), parsed like a gateway event."""
    data = factories.make_message_dict(channel, author, content=content, **extra)
    reference = extra.get("message_reference")
    if reference is not None:
        data["message_reference"] = reference
    state = backend.get_state()
    state.parse_message_create(data)
    backend._cur_config.messages.setdefault(channel.id, []).append(data)
    return state._get_message(data["id"])
