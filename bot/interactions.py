"""Answering an interaction, one way for every slash command, view and modal: who invoked it and where,
a private reply as the first response or a follow-up, and the one error ladder (Red's core/tree.py):
a user-facing error is the user's to read, anything else is logged and the user told so."""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from memory.errors import UserFacingError
from memory.service import Venue

log = logging.getLogger(__name__)

# The cogs reach services through themselves (PersonaeCog.runtime), never through `interaction.client`.
Interaction = discord.Interaction[commands.AutoShardedBot]
SOMETHING_WENT_WRONG = "Something went wrong on our side; it has been logged."


def user_id_of(interaction: discord.Interaction[Any]) -> str:
    return str(interaction.user.id)


def venue_of(interaction: discord.Interaction[Any]) -> Venue:
    """The conversation place of the invoking user: guild (None in a DM), channel and user."""
    return Venue(
        guild_id=str(interaction.guild_id) if interaction.guild_id else None,
        channel_id=str(interaction.channel_id) if interaction.channel_id else None,
        user_id=user_id_of(interaction),
    )


async def reply_privately(interaction: discord.Interaction[Any], message: str) -> None:
    """An ephemeral message as the first response or a follow-up, whichever is still open."""
    if interaction.response.is_done():
        await interaction.followup.send(message, ephemeral=True)
    else:
        await interaction.response.send_message(message, ephemeral=True)


async def report_error(interaction: discord.Interaction[Any], error: Exception, where: str) -> None:
    """Tell the user what went wrong, privately: a UserFacingError (or a refused check) as it is
    worded, anything else logged with its traceback and answered with a short notice."""
    original = getattr(error, "original", error)
    if isinstance(original, UserFacingError):
        message = str(original)
    elif isinstance(error, app_commands.CheckFailure):
        message = str(error) or "You can't use this command here."
    else:
        log.exception("%s failed", where, exc_info=original)
        message = SOMETHING_WENT_WRONG
    try:
        await reply_privately(interaction, message)
    except discord.HTTPException as exc:
        # Most often the interaction expired (a first response after Discord's 3 s, 10062 Unknown
        # interaction): nobody is left to tell, and raising here would only surface as "Task
        # exception was never retrieved".
        log.warning("Could not report an error to the user of %s: %s", where, exc)
