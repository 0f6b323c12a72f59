"""What slash commands read from an interaction: name autocomplete, who invoked them and where, and
the personality they may manage."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from memory.conversations import Venue
from memory.errors import InvalidInputError

if TYPE_CHECKING:
    from bot.client import PersonaeBot  # noqa: F401 (named by the forward reference below)
    from models import Personality

MAX_CHOICES = 25  # Discord shows at most this many autocomplete choices
Interaction = discord.Interaction["PersonaeBot"]


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
