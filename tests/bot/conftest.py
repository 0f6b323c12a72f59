"""The shipped bot (its class, its extension list) on one fake Discord (testkit.fake_discord), with the
real services behind it: PostgreSQL on a connection pool, Qdrant Edge, the local embedder, and the
LLMs over HTTP on 127.0.0.1. Some tests build their bot with settings of their own (`start_bot`)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.client import PersonaeBot
from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import FakeDiscord
from tests.bot.state import StartBot


@pytest.fixture
async def discord_world() -> AsyncIterator[FakeDiscord]:
    """The fake Discord, no bot connected yet."""
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def start_bot(discord_world: FakeDiscord, runtime: Runtime) -> StartBot:
    """Start the shipped bot on the fake Discord, on the test runtime with these settings changed."""

    async def start(**settings: Any) -> PersonaeBot:
        changed = dataclasses.replace(runtime, settings=runtime.settings.model_copy(update=settings))
        bot = PersonaeBot(runtime=changed)
        await discord_world.start(bot)
        return bot

    return start


@pytest.fixture
async def fake_discord(discord_world: FakeDiscord, start_bot: StartBot) -> FakeDiscord:
    """The fake Discord with the shipped bot connected and ready."""
    await start_bot()
    return discord_world


@pytest.fixture
async def lilith(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith", prompt="You are Lilith.")
    return personality


@pytest.fixture
async def sage(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Sage", prompt="You are Sage.")
    return personality
