"""The fake Discord's gateway: the zlib-compressed websocket the bot connects to, the events sent
over it, and waiting until the bot has handled them."""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any

import aiohttp
from aiohttp import web

from bot.chat.catch_up import CATCH_UP_TASK
from testkit import discord_payloads as payloads
from testkit.fake_discord.records import APP_ID, BOT_ID, GUILD
from testkit.fake_discord.state import DiscordState

# Tasks that belong to an event the bot is handling: discord.py's event and command dispatch, views,
# modals and dynamic items.
EVENT_TASK_PREFIXES = ("discord.py: ", "CommandTree-invoker", "discord-ui-")
SETTLE_TIMEOUT = 120.0


class Gateway(DiscordState):
    """The gateway of the fake Discord, and waiting for the bot to rest."""

    async def settle(self) -> None:
        """Wait for what the bot is doing: event handlers, then its background work, until both rest
        (the catch-up timer, a loop, excepted)."""
        background = getattr(self.bot, "background", None)
        while True:
            pending = _event_tasks()
            if pending:
                await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), SETTLE_TIMEOUT)
                continue
            if background is not None:
                await asyncio.wait_for(background.drain(keep_running=(CATCH_UP_TASK,)), SETTLE_TIMEOUT)
            if not _event_tasks():
                return

    async def wait_until(self, condition: Any) -> None:
        """Wait until `condition()` holds, for work no event waits for (the catch-up timer's pass)."""
        async with asyncio.timeout(SETTLE_TIMEOUT):
            while not condition():  # noqa: ASYNC110 (the bot's state, polled: nothing to wait on)
                await asyncio.sleep(0.05)

    async def reconnect(self) -> None:
        """Discord asks the bot to reconnect (op 7): it resumes its session (RESUMED)."""
        assert self.bot is not None
        resumed = asyncio.ensure_future(self.bot.wait_for("resumed", timeout=SETTLE_TIMEOUT))
        await self._send_all({"op": 7, "d": None})
        await resumed
        await self.settle()

    async def _dispatch_and_wait(
        self, event: str, data: dict[str, Any], handled_as: str, check: Any = None
    ) -> None:
        """Send the event over the gateway; return once the bot has dispatched it and handled it."""
        assert self.bot is not None, "start a bot first"
        seen = asyncio.ensure_future(self.bot.wait_for(handled_as, check=check, timeout=SETTLE_TIMEOUT))
        await asyncio.sleep(0)  # the listener is registered before the event can arrive
        await self._send_all({"op": 0, "t": event, "s": next(self._sequence), "d": data})
        await seen
        await self.settle()

    async def _send_all(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        for socket, compressor in list(self._sockets.items()):
            await socket.send_bytes(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        # zlib-stream, as discord.py asks for: one compressor per connection, each message flushed.
        compressor = zlib.compressobj()
        self._sockets[socket] = compressor

        async def send(message: dict[str, Any]) -> None:
            data = json.dumps(message).encode()
            await socket.send_bytes(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))

        try:
            await send({"op": 10, "d": {"heartbeat_interval": 45000}})
            async for frame in socket:
                if frame.type != aiohttp.WSMsgType.TEXT and frame.type != aiohttp.WSMsgType.BINARY:
                    continue
                message = json.loads(frame.data)
                op = message.get("op")
                if op == 1:
                    await send({"op": 11, "d": None})
                elif op == 2:
                    shard = message["d"].get("shard") or [0, 1]
                    # A guild's events go to shard (guild id >> 22) % shard count; DMs to shard 0.
                    served = (GUILD >> 22) % shard[1] == shard[0]
                    await send(
                        {"op": 0, "t": "READY", "s": next(self._sequence), "d": self._ready(shard, served)}
                    )
                    if served:
                        self.guild_sent = True
                        await send(
                            {
                                "op": 0,
                                "t": "GUILD_CREATE",
                                "s": next(self._sequence),
                                "d": self.guild_payload(),
                            }
                        )
                elif op == 6:
                    await send({"op": 0, "t": "RESUMED", "s": next(self._sequence), "d": {}})
        finally:
            self._sockets.pop(socket, None)
        return socket

    def _ready(self, shard: list[int], served: bool) -> dict[str, Any]:
        return {
            "v": 10,
            "user": payloads.user(BOT_ID, "Personae", bot=True) | {"verified": True, "mfa_enabled": False},
            "guilds": [{"id": str(GUILD), "unavailable": True}] if served else [],
            "session_id": f"fake-session-{shard[0]}",
            "resume_gateway_url": self._gateway_url(),
            "shard": shard,
            "application": {"id": str(APP_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }


def _event_tasks() -> list[asyncio.Task[Any]]:
    """The tasks of the events the bot is handling now."""
    current = asyncio.current_task()
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and t is not current and t.get_name().startswith(EVENT_TASK_PREFIXES)
    ]
