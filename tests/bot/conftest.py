"""Fixtures of the chat cog's tests: the bot loaded as it runs, on dpytest's fake gateway, with the real
services behind it (PostgreSQL on a connection pool, Qdrant Edge, the local embedder, the chat LLM over
HTTP on 127.0.0.1), and the personalities it talks as."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest

from bot.chat.catch_up import CATCH_UP_TASK
from bot.chat.cog import ChatCog
from bot.client import PersonaeBot
from models import Personality


class _NotTheBot:
    """Stands in for discord.AutoShardedClient while dpytest checks what it is given."""


@pytest.fixture
async def bot(runtime: Any) -> AsyncIterator[PersonaeBot]:
    client = PersonaeBot(runtime=runtime)
    await client._async_setup_hook()
    # dpytest builds members from its own cache; the real bot needs no members intent (a message carries
    # its author), but dpytest's fake guild can only hand out members it cached.
    intents = client.intents
    intents.members = True
    client._connection._intents = intents
    client._connection.member_cache_flags = discord.MemberCacheFlags.from_intents(intents)
    # dpytest refuses sharded clients outright, though its fake gateway is one shard's: the bot is
    # the sharded client production runs, so the refusal is lifted for configuring it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(discord, "AutoShardedClient", _NotTheBot)
        dpytest.configure(client, members=["Alice", "Bob"])
    client._connection.loop = asyncio.get_running_loop()  # dpytest leaves it unset; typing() needs it
    await client.load_extension("bot.chat")
    yield client
    await client.background.drain(keep_running=(CATCH_UP_TASK,))
    await client.unload_extension("bot.chat")
    await client.background.cancel_all()
    await dpytest.empty_queue()


@pytest.fixture
def cog(bot: PersonaeBot) -> ChatCog:
    found = bot.get_cog("ChatCog")
    # load_extension executes the module anew: its ChatCog is the one the bot holds.
    assert isinstance(found, sys.modules["bot.chat.cog"].ChatCog)
    return found  # type: ignore[no-any-return]


@pytest.fixture
async def lilith(runtime: Any) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith", prompt="You are Lilith.")
    return personality


@pytest.fixture
async def sage(runtime: Any) -> Personality:
    personality, _ = await runtime.personalities.create("Sage", prompt="You are Sage.")
    return personality


@pytest.fixture
def payloads(bot: PersonaeBot) -> list[dict[str, Any]]:
    """Every message payload the bot sent through the (fake) HTTP client."""
    seen: list[dict[str, Any]] = []
    original = bot.http.send_message

    async def spy(channel_id: int, *, params: Any) -> Any:
        seen.append(params.payload)
        channel = sys._getframe(1).f_locals.get("channel")  # dpytest reads its caller's `channel`
        assert channel is not None
        return await original(channel_id, params=params)

    bot.http.send_message = spy  # type: ignore[method-assign]
    return seen
