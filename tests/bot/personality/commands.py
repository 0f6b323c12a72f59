"""What the /personality tests share: the users they act as and the personality they create."""

from __future__ import annotations

from typing import Any

import discord
from sqlalchemy import select

from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import FakeDiscord, Invocation

MANAGE_CHANNELS = discord.Permissions(manage_channels=True).value
OWNER = 101
OTHER = 102
ADMIN = 900
GUILD = 300


async def create(
    fake_discord: FakeDiscord, name: str = "Lilith", user: int = OWNER, **extra: Any
) -> Invocation:
    return await fake_discord.command(
        "personality create",
        user=user,
        name=name,
        display_name=extra.pop("display_name", name),
        prompt=extra.pop("prompt", f"You are {name}."),
        **extra,
    )


async def stored(runtime: Runtime, name: str) -> Personality | None:
    async with runtime.sessionmaker() as session:
        return await session.scalar(select(Personality).where(Personality.name == name))
