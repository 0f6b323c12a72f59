"""The Discord client: intents, extensions, background tasks, and the one error path for slash commands."""

from __future__ import annotations

import logging

import discord
from discord import app_commands
from discord.ext import commands

from bot.interactions import report_error
from bot.runtime import Runtime
from bot.tasks import BackgroundTasks

log = logging.getLogger(__name__)

# The features with slash commands (and message menus); chat listens to messages and publishes none.
SLASH_COMMAND_EXTENSIONS: tuple[str, ...] = ("bot.memory", "bot.personality", "bot.persona")
EXTENSIONS: tuple[str, ...] = (*SLASH_COMMAND_EXTENSIONS, "bot.chat")
# Who a start's warm-up speaks as: no Discord id (digits) can be it, and its message is taken back.
WARM_UP_USER = "warm-up"


class PersonaeTree(app_commands.CommandTree["PersonaeBot"]):
    """Turns user-facing errors into an ephemeral reply; logs everything else."""

    async def on_error(
        self, interaction: discord.Interaction[PersonaeBot], error: app_commands.AppCommandError
    ) -> None:
        name = interaction.command.qualified_name if interaction.command else "?"
        await report_error(interaction, error, f"Command {name!r}")


async def sync_command_tree(bot: commands.AutoShardedBot, guild_id: int | None = None) -> list[str]:
    """Publish the slash commands, globally or (copied) to one guild; returns the top-level names."""
    guild = discord.Object(id=guild_id) if guild_id else None
    if guild is not None:
        bot.tree.copy_global_to(guild=guild)
    synced = await bot.tree.sync(guild=guild)
    return [command.name for command in synced]


class PersonaeClient(commands.AutoShardedBot):
    """Intents, mentions and the error-handling tree shared by the bot and the command publisher.

    Sharded from the start: past 2,500 guilds Discord requires it. With no shard count set, discord.py
    asks Discord for the recommended count and runs every shard in this process; SHARD_COUNT with
    SHARD_IDS splits them over processes (and machines) sharing one PostgreSQL and one Qdrant server.
    """

    def __init__(self, *, shard_count: int | None = None, shard_ids: list[int] | None = None) -> None:
        # The bot never joins voice: discord.py's warnings about missing voice libraries are noise.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        intents = discord.Intents.default()
        intents.message_content = True
        intents.members = False
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents,
            tree_cls=PersonaeTree,
            allowed_mentions=discord.AllowedMentions.none(),
            shard_count=shard_count,
            shard_ids=shard_ids,  # type: ignore[arg-type]  # None (all shards) is discord.py's default
        )


class PersonaeBot(PersonaeClient):
    """Holds the runtime (services) it was given and its background tasks; builds nothing itself."""

    def __init__(self, *, runtime: Runtime) -> None:
        settings = runtime.settings
        super().__init__(shard_count=settings.shard_count, shard_ids=settings.shard_ids)
        self.runtime = runtime
        self.background = BackgroundTasks()

    async def setup_hook(self) -> None:
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        await warm_up_replies(self.runtime)

    async def on_ready(self) -> None:
        log.info("Logged in as %s (%s)", self.user, self.user and self.user.id)

    async def close(self) -> None:
        # Interrupted work resumes from the message log (the chat cog's catch-up, or `personae worker`).
        await self.background.cancel_all()
        await super().close()


class CommandPublisher(PersonaeClient):
    """Only the slash-command tree, for `personae sync-commands`: no runtime, no gateway.

    The cogs read `bot.runtime` only when a command runs, which this client never does, so publishing
    needs neither the database nor the vector index (both may be in use by the running bot).
    """

    async def setup_hook(self) -> None:
        for extension in SLASH_COMMAND_EXTENSIONS:
            await self.load_extension(extension)


async def warm_up_replies(runtime: Runtime) -> None:
    """A reply's path made once before the gateway connects, and undone (ChatService.warm_up): its SQL
    compiled, the pool's connections opened, the embedding model loaded and the index searched, so the
    first message or interaction after a start waits on none of it (Discord's 3 s). The model client
    is loaded before (bot.cli.warm_up, `personae run`). No personality yet: nothing to warm."""
    personalities = await runtime.personalities.list()
    if not personalities:
        return
    await runtime.chat.warm_up(
        personality_id=personalities[0].id,
        user_id=WARM_UP_USER,
        user_name="Warm-up",
        guild_id=None,
        channel_id=None,
    )
