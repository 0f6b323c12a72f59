"""What slash commands declare and read: `command`, a command and its options in one decorator;
`CommandPart`, what every cog part shares (the bot, its runtime); name autocomplete; who invoked a
command and where; the personality they may manage."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.ext import commands

from memory.conversations import Venue
from memory.errors import InvalidInputError

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.runtime import Runtime
    from models import Personality

MAX_CHOICES = 25  # Discord shows at most this many autocomplete choices
MAX_QUERY_CHARS = 300
Interaction = discord.Interaction["PersonaeBot"]
# What to look for in one's memories (/memory search and browse).
SearchQuery = app_commands.Range[str, 1, MAX_QUERY_CHARS]


async def personality_autocomplete(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
    """Personalities whose name starts with what has been typed (at most 25)."""
    rows = await interaction.client.runtime.personalities.names_matching(current)
    return [app_commands.Choice(name=f"{display} ({name})"[:100], value=name) for name, display in rows]


async def model_autocomplete(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
    """LLM config names and allow-listed model prefixes that start with what has been typed."""
    runtime = interaction.client.runtime
    names = [c.name for c in await runtime.llm_configs.list()]
    options = ["default", *names, *runtime.personalities.model_allow_list]
    matching = [o for o in options if o.startswith(current.strip())]
    return [app_commands.Choice(name=o, value=o) for o in matching][:MAX_CHOICES]


# Options that take a name, completed as the user types wherever a command has them.
COMPLETED = {"personality": personality_autocomplete, "model": model_autocomplete}


def command(
    name: str, description: str, /, **descriptions: str
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], app_commands.Command[Any, ..., None]]:
    """A slash command in one decorator: its name and description, its options described, and the
    `personality` and `model` options autocompleted (instead of `app_commands.command`,
    `app_commands.describe` and `app_commands.autocomplete` on every command)."""
    completed = {option: COMPLETED[option] for option in descriptions if option in COMPLETED}

    def declare(callback: Callable[..., Coroutine[Any, Any, None]]) -> app_commands.Command[Any, ..., None]:
        described = app_commands.describe(**descriptions)(callback)
        if completed:
            described = app_commands.autocomplete(**completed)(described)
        return app_commands.command(name=name, description=description)(described)

    return declare


class CommandPart(commands.Cog):
    """What every cog and part of a cog shares: the bot, its runtime, a personality by optional name."""

    bot: PersonaeBot

    @property
    def runtime(self) -> Runtime:
        return self.bot.runtime

    async def _personality(self, name: str | None) -> Personality | None:
        """The personality called `name`, relationships loaded; None when no name was given."""
        return await self.runtime.personalities.get_detailed(name) if name else None


def user_id_of(interaction: Interaction) -> str:
    return str(interaction.user.id)


async def managed_personality(interaction: Interaction, name: str) -> Personality:
    """The personality `name`, if the invoking user may manage it (else a PermissionDeniedError): for
    commands that ask something (a confirmation, a modal) before the service call checks again."""
    service = interaction.client.runtime.personalities
    personality = await service.get(name)
    service.require_manager(personality, user_id_of(interaction))
    return personality


def venue_of(interaction: Interaction) -> Venue:
    """The conversation place of the invoking user: guild (None in a DM), channel and user."""
    return Venue(
        guild_id=str(interaction.guild_id) if interaction.guild_id else None,
        channel_id=str(interaction.channel_id) if interaction.channel_id else None,
        user_id=user_id_of(interaction),
    )


def memory_id_of(option: str) -> uuid.UUID:
    """The `memory` option of /memory forget as a memory id (ids come from /memory search)."""
    try:
        return uuid.UUID(option.strip())
    except ValueError:
        raise InvalidInputError(
            f"{option!r} is not a memory id; `/memory search` shows ids, or use 'all'."
        ) from None
