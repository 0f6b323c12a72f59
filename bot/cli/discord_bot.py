"""`personae run` and `personae sync-commands`: the bot on Discord, and its slash commands published."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from bot.cli.output import CommandError
from bot.cli.stopping import stop_on_sigterm

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.settings import BotSettings

DISCORD_TOKEN_HELP = (
    "DISCORD_TOKEN is not set. Create a bot at https://discord.com/developers/applications "
    "(Bot -> Reset Token), enable the Message Content intent, then run: "
    "DISCORD_TOKEN=your-token personae run"
)
TOKEN_REJECTED = "Discord rejected DISCORD_TOKEN; reset it in the developer portal."


def add_commands(commands: Subcommands) -> None:
    commands.add_parser("run", help="start the Discord bot").set_defaults(
        standalone=cmd_run, long_running=True
    )
    sync = commands.add_parser("sync-commands", help="publish the slash commands to Discord")
    sync.add_argument("--guild", type=int, help="sync to one guild only (shows up at once; good for testing)")
    sync.set_defaults(standalone=cmd_sync_commands)


class DiscordUnreachableError(Exception):
    """discord.com could not be reached at all (network, DNS, proxy)."""


def discord_token(settings: BotSettings) -> str:
    """The bot's token, or the one-line explanation of how to get one."""
    token = settings.discord_token.get_secret_value().strip() if settings.discord_token else ""
    if not token:
        raise CommandError(DISCORD_TOKEN_HELP)
    return token


def cmd_run(args: argparse.Namespace, settings: BotSettings) -> int:
    """Run the bot until stopped; a bad token or a missing intent is one line, not a traceback."""
    token = discord_token(settings)
    import discord

    try:
        asyncio.run(serve(settings, token))
    except discord.LoginFailure:
        raise CommandError(TOKEN_REJECTED) from None
    except discord.PrivilegedIntentsRequired:
        raise CommandError("enable the Message Content intent for the bot in the developer portal.") from None
    except DiscordUnreachableError as exc:
        raise CommandError(f"Cannot reach Discord: {exc}. Check this machine's network access.") from None
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (stop_on_sigterm)
        return 0
    return 0


async def serve(settings: BotSettings, token: str) -> None:
    """Build the runtime, then the bot on it, and stay connected to Discord until stopped."""
    import aiohttp

    from bot.cli.index_holder import serving_index_commands
    from bot.cli.warm_up import ModelClientWarmUp
    from bot.client import PersonaeBot
    from bot.runtime import open_runtime

    stop_on_sigterm()
    model_client = ModelClientWarmUp(settings.chat_model)  # loaded while the runtime opens
    async with (
        open_runtime(settings) as runtime,
        serving_index_commands(runtime),  # `personae recall` and `memory ...` run beside the bot
        PersonaeBot(runtime=runtime) as bot,
    ):
        # Connected only once loaded: no message or interaction then waits on it on the event loop
        # (nor on a reply's path, made once by the bot's setup: bot.client.warm_up_replies).
        await model_client.ready()
        try:
            await bot.start(token)
        except aiohttp.ClientConnectionError as exc:
            # Raised as its own type so it is not mistaken for the database being unreachable.
            raise DiscordUnreachableError(str(exc)) from exc


def cmd_sync_commands(args: argparse.Namespace, settings: BotSettings) -> int:
    names = asyncio.run(publish_commands(discord_token(settings), args.guild))
    where = (
        f"guild {args.guild}" if args.guild else "every guild (global commands may take a while to appear)"
    )
    print(f"Synced {len(names)} commands to {where}: {', '.join('/' + n for n in names)}")
    return 0


def guild_out_of_reach(guild_id: int, application_id: int | None) -> str:
    """What to do when Discord refuses the commands of a guild: the bot is not in it, or the id is wrong."""
    invite = (
        f"https://discord.com/oauth2/authorize?client_id={application_id}&scope=bot+applications.commands"
        if application_id
        else "the OAuth2 URL generator of the developer portal (scopes bot and applications.commands)"
    )
    return (
        f"Discord refused the commands for guild {guild_id}: the bot is not in that guild or the id is "
        f"wrong. Invite the bot with the applications.commands scope ({invite}), or check the id."
    )


async def publish_commands(token: str, guild_id: int | None) -> list[str]:
    """Log in over HTTP only (no gateway, no database) and publish the slash-command tree."""
    import aiohttp
    import discord

    from bot.client import CommandPublisher, sync_command_tree

    async with CommandPublisher() as client:
        try:
            await client.login(token)  # loads the cogs through setup_hook
            return await sync_command_tree(client, guild_id)
        except discord.LoginFailure:
            raise CommandError(TOKEN_REJECTED) from None
        except discord.HTTPException as exc:
            # 403 Missing Access (50001), 404 Unknown Guild (10004), or a 401 for a guild's commands.
            if guild_id is None or exc.status not in (401, 403, 404):
                raise
            raise CommandError(guild_out_of_reach(guild_id, client.application_id)) from None
        except aiohttp.ClientConnectionError as exc:
            raise CommandError(f"Cannot reach Discord: {exc}. Check this machine's network access.") from None
