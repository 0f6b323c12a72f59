"""The fake Discord's world: the guild, its channels and threads, DMs, and what the bot has sent."""

from __future__ import annotations

import asyncio
import itertools
import re
from datetime import UTC, datetime
from typing import Any

import discord
from aiohttp import web

from testkit import discord_payloads as payloads
from testkit.discord_payloads import GUILD_TEXT
from testkit.fake_discord.records import (
    BOT_ID,
    BOT_ROLE,
    CHANNEL,
    EVERYONE_ROLE,
    GUILD,
    PLAIN_CHANNEL,
    Emoji,
    Failure,
    InteractionRecord,
    Request,
    SentMessage,
    Webhook,
)


class DiscordState:
    """What the fake Discord holds, shared by its gateway, its API and what users do."""

    def __init__(self) -> None:
        self._ids = itertools.count(800000000000000001)
        self.messages: dict[int, SentMessage] = {}
        self.webhooks: dict[str, Webhook] = {}  # by token
        self.reactions: list[tuple[int, int, str]] = []  # (channel id, message id, emoji)
        self.interactions: dict[str, InteractionRecord] = {}  # by token
        self.expired: set[str] = set()  # interaction tokens Discord no longer knows (after its 3 s)
        self.synced: dict[str, list[dict[str, Any]]] = {}  # published commands, by route
        self.emojis: dict[int, Emoji] = {}
        self.files: dict[str, bytes] = {}  # what the CDN serves, by path
        self.requests: list[Request] = []  # every request the bot made, in order
        self.typing: list[int] = []  # channels the bot showed "typing…" in
        self.guild_sent = False  # whether the gateway sent its guild to the bot started last
        self.channels: dict[int, dict[str, Any]] = {}
        self.threads: dict[int, dict[str, Any]] = {}
        self.dm_of: dict[int, int] = {}  # user id -> their DM channel with the bot
        self._failures: list[Failure] = []
        self._sockets: dict[web.WebSocketResponse, Any] = {}  # each with its zlib compressor
        self._sequence = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._saved_addresses = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        self.base_url = ""
        self.bot: Any = None
        self._bot_task: asyncio.Task[None] | None = None
        for channel_id, name in ((CHANNEL, "general"), (PLAIN_CHANNEL, "plain")):
            self.add_channel(channel_id, name=name, webhooks=channel_id == CHANNEL)

    # ------------------------------------------------------------------ the world

    def add_channel(self, channel_id: int, *, name: str, webhooks: bool = True) -> None:
        """A text channel of the guild (before the bot connects); `webhooks`: the bot may manage them."""
        deny = discord.Permissions(manage_webhooks=True).value if not webhooks else 0
        overwrites = [{"id": str(BOT_ROLE), "type": 0, "allow": "0", "deny": str(deny)}] if deny else []
        self.channels[channel_id] = payloads.channel(
            channel_id, kind=GUILD_TEXT, guild_id=GUILD, name=name, overwrites=overwrites
        )

    def dm_channel(self, user_id: int) -> int:
        """The DM channel of this user with the bot."""
        return self.dm_of.setdefault(user_id, 900000000000000000 + user_id)

    def next_id(self) -> int:
        return next(self._ids)

    def guild_payload(self) -> dict[str, Any]:
        text = discord.Permissions.text() | discord.Permissions(view_channel=True)
        return payloads.guild(
            GUILD,
            name="Library",
            owner_id=1,
            roles=[
                payloads.role(EVERYONE_ROLE, "@everyone", text),
                payloads.role(BOT_ROLE, "Personae", text | discord.Permissions(manage_webhooks=True), 1),
            ],
            channels=[self._with_last_message(c) for c in self.channels.values()],
            threads=[self._with_last_message(t) for t in self.threads.values()],
            members=[payloads.member(BOT_ID, "Personae", bot=True, roles=[BOT_ROLE])],
        )

    def _with_last_message(self, channel: dict[str, Any]) -> dict[str, Any]:
        """The channel as Discord sends it in a guild: with the id of its last message."""
        found = self.in_channel(int(channel["id"]))
        return channel | {"last_message_id": str(found[-1].id) if found else None}

    def in_channel(self, channel_id: int) -> list[SentMessage]:
        """The channel's messages as they are now, oldest first."""
        return sorted((m for m in self.messages.values() if m.channel_id == channel_id), key=lambda m: m.id)

    def sent_by_bot(self, channel_id: int) -> list[SentMessage]:
        """The channel's messages the bot sent, as itself or through its webhooks, oldest first."""
        hooks = {hook.id for hook in self.webhooks.values()}
        return [
            m for m in self.in_channel(channel_id) if m.author["id"] == str(BOT_ID) or m.webhook_id in hooks
        ]

    def edits_of(self, message_id: int) -> list[str]:
        """The paths of the requests that edited this message, in order."""
        return [r.path for r in self.requests if r.method == "PATCH" and r.path.endswith(f"/{message_id}")]

    def reacted(self, emoji: str = "📝") -> set[int]:
        """Ids of the messages the bot reacted to with `emoji`."""
        return {message for _, message, e in self.reactions if e == emoji}

    def fail(self, method: str, path: str, status: int, code: int = 0, message: str = "") -> None:
        """The next request `method` to a path matching the regular expression `path` fails so."""
        text = message or {403: "Missing Permissions", 404: "Unknown"}.get(status, "Error")
        self._failures.append(Failure(re.compile(f"{method} {path}"), status, code, text))

    def _store(
        self,
        content: str,
        *,
        channel_id: int,
        author: dict[str, Any],
        webhook_id: int | None = None,
        reference: dict[str, Any] | None = None,
        message_id: int | None = None,
        created_at: datetime | None = None,
    ) -> SentMessage:
        message = SentMessage(
            id=message_id or discord.utils.time_snowflake(datetime.now(UTC)) + next(self._ids) % 4096,
            channel_id=channel_id,
            author=author,
            content=content,
            webhook_id=webhook_id,
            reference=reference,
            created_at=created_at or datetime.now(UTC),
        )
        self.messages[message.id] = message
        return message

    def _reference(self, message_id: int | None) -> dict[str, Any] | None:
        if message_id is None:
            return None
        target = self.messages[message_id]
        reference = {"message_id": str(message_id), "channel_id": str(target.channel_id)}
        if target.channel_id not in self.dm_of.values():
            reference["guild_id"] = str(GUILD)
        return reference

    def _guild_of(self, channel_id: int) -> int | None:
        return None if channel_id in self.dm_of.values() else GUILD

    def _gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.base_url.rsplit(':', 1)[1]}/gateway"
