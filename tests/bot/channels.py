"""Channels on the fake Discord of tests/bot/interactions.py: a guild whose text channel lets the bot
manage webhooks, and DMs; users say things (MESSAGE_CREATE through the bot's gateway parser), the bot
answers through its real senders (the channel's webhook, or its own messages), and users press the
buttons on those answers (INTERACTION_CREATE, dispatched by discord.py's view store).

Only Discord's servers are played: `ChannelHTTP` answers the REST calls the bot makes for channels,
webhooks, typing and reactions, and keeps the messages as users would see them after every edit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import discord

from bot.chat.catch_up import CATCH_UP_TASK
from bot.client import PersonaeBot
from tests.bot.interactions import (
    AWAITED_TASK_PREFIXES,
    BOT_USER_ID,
    SLASH_COMMAND_EXTENSIONS,
    Attachment,
    DiscordHarness,
    FakeDiscordHTTP,
    SentMessage,
    open_harness,
)

GUILD = 300
CHANNEL = 500
DM_CHANNEL = 900
# Dynamic items (the regenerate button) run under a task name of their own.
CLICK_TASK_PREFIXES = (*AWAITED_TASK_PREFIXES, "discord-ui-dynamic-item")


@dataclass
class ChannelMessage(SentMessage):
    """A message in a channel: the bot's own, or one a webhook posted under a personality's name."""

    webhook_id: int | None = None
    username: str = "Personae"

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        if self.webhook_id is not None:
            data["webhook_id"] = str(self.webhook_id)
            data["author"] = {
                "id": str(self.webhook_id),
                "username": self.username,
                "discriminator": "0000",
                "avatar": None,
                "bot": True,
            }
        return data


@dataclass
class Hook:
    id: int
    token: str
    channel_id: int
    name: str


class ChannelHTTP(FakeDiscordHTTP):
    """FakeDiscordHTTP plus what channels and webhooks answer: messages sent, edited and deleted,
    webhooks listed and created, typing and reactions acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: dict[str, Hook] = {}  # by token
        self.reactions: list[tuple[int, str]] = []  # (message id, emoji)

    def in_channel(self, channel_id: int) -> list[ChannelMessage]:
        """The channel's messages as they are now, oldest first."""
        return [
            m for m in self.messages.values() if isinstance(m, ChannelMessage) and m.channel_id == channel_id
        ]

    def edits_of(self, message_id: int) -> list[str]:
        """The paths of the requests that edited this message (PATCH), in order."""
        return [r.path for r in self.requests if r.method == "PATCH" and r.path.endswith(f"/{message_id}")]

    def _post(self, channel_id: int, data: dict[str, Any], hook: Hook | None) -> ChannelMessage:
        message = ChannelMessage(
            id=self.next_id(),
            channel_id=channel_id,
            webhook_id=hook.id if hook is not None else None,
            username=str(data.get("username") or "Personae"),
        )
        self._apply(message, data, [])
        self.messages[message.id] = message
        return message

    def _change(self, method: str, message_id: int, data: dict[str, Any]) -> tuple[int, Any]:
        message = self.messages[message_id]
        if method == "DELETE":
            del self.messages[message_id]
            return 204, None
        self._apply(message, data, [])
        message.edits += 1
        return 200, message.payload()

    def _answer(
        self, method: str, parts: list[str], payload: Any, files: list[Attachment]
    ) -> tuple[int, Any]:
        data = payload if isinstance(payload, dict) else {}
        if parts[0] == "webhooks" and parts[2] in self.hooks:
            hook = self.hooks[parts[2]]
            if len(parts) == 3 and method == "POST":
                return 200, self._post(hook.channel_id, data, hook).payload()
            return self._change(method, int(parts[4]), data)
        if parts[0] != "channels":
            return super()._answer(method, parts, payload, files)
        channel_id = int(parts[1])
        if parts[2:] == ["typing"]:
            return 204, None
        if parts[2:] == ["webhooks"]:
            if method == "GET":
                return 200, [self._hook_payload(h) for h in self.hooks.values() if h.channel_id == channel_id]
            hook = Hook(self.next_id(), f"hook-token-{len(self.hooks)}", channel_id, data["name"])
            self.hooks[hook.token] = hook
            return 200, self._hook_payload(hook)
        if parts[2:] == ["messages"]:
            return 200, self._post(channel_id, data, None).payload()
        if len(parts) > 5 and parts[4] == "reactions":
            self.reactions.append((int(parts[3]), parts[5]))
            return 204, None
        return self._change(method, int(parts[3]), data)

    @staticmethod
    def _hook_payload(hook: Hook) -> dict[str, Any]:
        return {
            "id": str(hook.id),
            "type": 1,
            "channel_id": str(hook.channel_id),
            "guild_id": str(GUILD),
            "name": hook.name,
            "avatar": None,
            "token": hook.token,
        }


class Channels:
    """A bot with the chat cog and the slash commands loaded, on ChannelHTTP, in a guild and in DMs."""

    def __init__(self, harness: DiscordHarness) -> None:
        self.harness = harness
        self.bot = harness.bot
        self.http = ChannelHTTP()
        harness.http = self.http
        self.bot.http._HTTPClient__session = self.http  # type: ignore[attr-defined]
        self._ids = iter(range(400000000000000001, 500000000000000000))
        state = self.bot._connection
        # What GUILD_CREATE would have cached: the guild, its text channel, the bot as its owner (so
        # it may manage webhooks there).
        state._add_guild_from_data(  # type: ignore[arg-type]
            {
                "id": str(GUILD),
                "name": "Library",
                "owner_id": str(BOT_USER_ID),
                "roles": [
                    {
                        "id": str(GUILD),
                        "name": "@everyone",
                        "permissions": str(discord.Permissions.text().value),
                        "position": 0,
                        "color": 0,
                        "hoist": False,
                        "managed": False,
                        "mentionable": False,
                        "flags": 0,
                    }
                ],
                "channels": [
                    {
                        "id": str(CHANNEL),
                        "type": 0,
                        "name": "general",
                        "position": 0,
                        "permission_overwrites": [],
                        "nsfw": False,
                        "parent_id": None,
                    }
                ],
                "members": [self._member(BOT_USER_ID, bot=True)],
                "member_count": 1,
                "features": [],
                "emojis": [],
                "stickers": [],
            }
        )

    def _member(self, user_id: int, *, bot: bool = False) -> dict[str, Any]:
        return {
            "user": self.harness.user_payload(user_id) | {"bot": bot},
            "roles": [],
            "joined_at": "2024-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
        }

    async def settle(self, before: set[asyncio.Task[Any]]) -> None:
        """Wait for what the last event started: its handlers, then the bot's after-reply work."""
        while True:
            pending = [
                t
                for t in asyncio.all_tasks() - before
                if not t.done() and t.get_name().startswith(CLICK_TASK_PREFIXES)
            ]
            if pending:
                await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 120)
                continue
            assert isinstance(self.bot, PersonaeBot)
            await self.bot.background.drain(keep_running=(CATCH_UP_TASK,))
            return

    async def say(self, content: str, *, user: int, guild: int | None = GUILD) -> int:
        """A user's message (in the guild's channel, or with guild None in their DM); returns its id."""
        message_id = next(self._ids)
        data: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(CHANNEL if guild is not None else DM_CHANNEL),
            "author": self.harness.user_payload(user),
            "content": content,
            "timestamp": "2024-01-01T00:00:00+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if guild is not None:
            data["guild_id"] = str(guild)
            data["member"] = {k: v for k, v in self._member(user).items() if k != "user"}
        before = asyncio.all_tasks()
        self.bot._connection.parse_message_create(data)  # type: ignore[arg-type]
        await self.settle(before)
        return message_id

    async def press(
        self, message: SentMessage, *, user: int, guild: int | None = GUILD, index: int = 0
    ) -> Any:
        """Press the message's button (the first, or `index`), as `user`; returns the Invocation."""
        from tests.bot.interactions import Invocation

        button = message.buttons[index]
        payload = self.harness._base(3, user=user, guild=guild, channel=message.channel_id, permissions=0)
        payload["data"] = {"custom_id": button["custom_id"], "component_type": 2}
        payload["message"] = message.payload()
        self.http.original_by_token[payload["token"]] = message.id
        before = asyncio.all_tasks()
        self.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        await self.settle(before)
        interaction = discord.Interaction(data=payload, state=self.bot._connection)
        return Invocation(payload["token"], self.http, interaction)


def chat_requests(llm_server: Any) -> list[dict[str, Any]]:
    """What the chat model was asked (not the summarizer), oldest first."""
    return [r for r in llm_server.requests if r.get("model") == "test-chat"]


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


@asynccontextmanager
async def open_channels(runtime: Any) -> AsyncIterator[Channels]:
    """The bot as it runs (slash commands and the chat cog) on a fake Discord with a guild and DMs."""
    extensions = tuple(dict.fromkeys((*SLASH_COMMAND_EXTENSIONS, "bot.persona", "bot.chat")))
    async with open_harness(runtime, extensions) as harness:
        yield Channels(harness)
