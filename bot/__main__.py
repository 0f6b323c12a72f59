"""`python -m bot`: build settings, database, services, then the bot, and run it until stopped."""

from __future__ import annotations

import asyncio
import logging
import sys

from memory.settings import Settings

log = logging.getLogger(__name__)


async def _serve(settings: Settings) -> None:
    import aiohttp

    from bot.client import PersonaeBot
    from bot.runtime import open_runtime

    assert settings.discord_token is not None
    async with open_runtime(settings, with_memory=True) as runtime, PersonaeBot(runtime=runtime) as bot:
        try:
            await bot.start(settings.discord_token.get_secret_value())
        except aiohttp.ClientConnectionError as exc:
            # Raised as its own type so it is not mistaken for the database being unreachable.
            raise DiscordUnreachableError(str(exc)) from exc


class DiscordUnreachableError(Exception):
    """discord.com could not be reached at all (network, DNS, proxy)."""


def run_bot(settings: Settings) -> int:
    """Run the bot; a bad token is one line, not a traceback."""
    import discord

    try:
        asyncio.run(_serve(settings))
    except discord.LoginFailure:
        print("personae: Discord rejected DISCORD_TOKEN; reset it in the developer portal.", file=sys.stderr)
        return 1
    except discord.PrivilegedIntentsRequired:
        print(
            "personae: enable the Message Content intent for the bot in the developer portal.",
            file=sys.stderr,
        )
        return 1
    except DiscordUnreachableError as exc:
        print(f"personae: Cannot reach Discord: {exc}. Check this machine's network access.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    from bot.cli import main

    sys.exit(main(["run", *sys.argv[1:]]))
