"""The fake Discord as the tests use it: its server on 127.0.0.1, and the shipped bot started on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import discord
import yarl
from aiohttp import web

from testkit.fake_discord.records import GUILD, TOKEN
from testkit.fake_discord.rest import RestApi
from testkit.fake_discord.users import UserActions

# discord.py holds READY back until no GUILD_CREATE came for `guild_ready_timeout` (2 s: a real gateway
# streams a bot's guilds in, 0.5 s here cost the suite a minute over its ~150 bot starts). This gateway
# writes its one guild in the same turn of the event loop as READY, so the bot has read it before it
# starts to wait; `start` checks that it did.
GUILD_WAIT = 0.05


class FakeDiscord(UserActions, RestApi):
    """Discord's side of one bot: see the package docstring. Use as an async context manager, then
    `start` a bot."""

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/cdn/{path:.*}", self._cdn)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        discord.http.Route.BASE = f"{self.base_url}/api/v10"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self._gateway_url())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self._saved_addresses
        if self._runner is not None:
            await self._runner.cleanup()

    async def start(self, bot: Any) -> None:
        """Start the bot as `personae run` does (login, extensions, gateway), then wait until it is
        ready and has done what READY starts (reading back what it missed)."""
        self.bot, self.guild_sent = bot, False
        bot._connection.guild_ready_timeout = GUILD_WAIT
        await bot.__aenter__()  # as `personae run` enters it (`async with PersonaeBot(...)`)
        self._bot_task = asyncio.create_task(bot.start(TOKEN), name="fake-discord-bot")
        ready = asyncio.create_task(bot.wait_until_ready())
        done, _ = await asyncio.wait({ready, self._bot_task}, return_when=asyncio.FIRST_COMPLETED)
        if self._bot_task in done:
            ready.cancel()
            self._bot_task.result()  # raises the bot's error
            raise RuntimeError("the bot stopped before it was ready")
        if self.guild_sent and bot.get_guild(GUILD) is None:
            raise RuntimeError(f"the bot was ready before its guild came ({GUILD_WAIT} s after READY)")
        await self.settle()

    async def stop(self) -> None:
        """Stop the bot as Ctrl-C does (its close cancels its background work)."""
        if self.bot is None:
            return
        bot, task = self.bot, self._bot_task
        self.bot, self._bot_task = None, None
        await bot.__aexit__(None, None, None)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for socket in list(self._sockets):
            await socket.close()


@contextlib.asynccontextmanager
async def running_bot(discord_: FakeDiscord, bot: Any) -> AsyncIterator[Any]:
    """The bot started on this fake Discord for the block, then stopped."""
    await discord_.start(bot)
    try:
        yield bot
    finally:
        await discord_.stop()
