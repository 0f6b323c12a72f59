"""The Discord client: intents, extensions, and the one error path for slash commands."""

from __future__ import annotations

import logging

import discord
from discord import app_commands
from discord.ext import commands

from bot.runtime import Runtime
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

EXTENSIONS: tuple[str, ...] = ("bot.cogs.memory", "bot.cogs.personality", "bot.cogs.chat")


class PersonaeTree(app_commands.CommandTree["PersonaeBot"]):
    """Turns user-facing errors into an ephemeral reply; logs everything else."""

    async def on_error(
        self, interaction: discord.Interaction[PersonaeBot], error: app_commands.AppCommandError
    ) -> None:
        original = getattr(error, "original", error)
        if isinstance(original, UserFacingError):
            message = str(original)
        elif isinstance(error, app_commands.CheckFailure):
            message = str(error) or "You can't use this command here."
        else:
            log.exception(
                "Command %r failed",
                interaction.command and interaction.command.qualified_name,
                exc_info=original,
            )
            message = "Something went wrong on our side; it has been logged."
        if interaction.response.is_done():
            await interaction.followup.send(message, ephemeral=True)
        else:
            await interaction.response.send_message(message, ephemeral=True)


async def sync_command_tree(bot: commands.Bot, guild_id: int | None = None) -> list[str]:
    """Publish the slash commands, globally or (copied) to one guild; returns the top-level names."""
    guild = discord.Object(id=guild_id) if guild_id else None
    if guild is not None:
        bot.tree.copy_global_to(guild=guild)
    synced = await bot.tree.sync(guild=guild)
    return [command.name for command in synced]


class PersonaeBot(commands.Bot):
    """Holds the runtime (services) it was given; builds nothing itself."""

    def __init__(self, *, runtime: Runtime) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        intents.members = False
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents,
            tree_cls=PersonaeTree,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.runtime = runtime

    async def setup_hook(self) -> None:
        for extension in EXTENSIONS:
            await self.load_extension(extension)

    async def on_ready(self) -> None:
        log.info("Logged in as %s (%s)", self.user, self.user and self.user.id)
