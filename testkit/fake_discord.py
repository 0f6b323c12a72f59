"""One fake Discord: a real HTTP server and gateway on 127.0.0.1 that the shipped bot logs in to and
connects to as it does to Discord (its own aiohttp client, its own zlib-compressed websocket), with a
guild, channels, DMs and users that say things, run slash commands and press buttons.

The bot is `bot.client.PersonaeBot` with its extension list, started with `start()` as `personae run`
starts it. Only Discord's addresses change: its API's (`discord.http.Route.BASE`, the class attribute
discord.py itself sets when its API version changes) and its gateway's for a process given its shards
(`DiscordWebSocket.DEFAULT_GATEWAY`); otherwise the gateway's comes, as from Discord, from GET
/gateway/bot. Users act through the gateway (MESSAGE_CREATE, INTERACTION_CREATE); the bot
answers over REST, and the server keeps what users would see: messages after every edit, reactions,
webhooks, interaction responses, published commands, application emojis. `fail()` makes the next
matching request fail as Discord does (a status and an error body). Every action returns once the bot
has handled it, the background work it spawned included (the catch-up timer, if on, excepted).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import aiohttp
import discord
import yarl
from aiohttp import web

from bot.chat.catch_up import CATCH_UP_TASK
from testkit import discord_payloads as payloads
from testkit.discord_payloads import DM, EPHEMERAL, GUILD_TEXT, LOADING, PUBLIC_THREAD

APP_ID = 700000000000000001
BOT_ID = 700000000000000002
GUILD = 300
CHANNEL = 500  # the bot may manage webhooks here: replies come under each personality's name
PLAIN_CHANNEL = 501  # it may not: replies come as its own messages, the name in bold
EVERYONE_ROLE = GUILD
BOT_ROLE = 301
TOKEN = "fake-discord-token"
# Tasks that belong to an event the bot is handling: discord.py's event and command dispatch, views,
# modals and dynamic items.
EVENT_TASK_PREFIXES = ("discord.py: ", "CommandTree-invoker", "discord-ui-")
SETTLE_TIMEOUT = 120.0


@dataclass
class Attachment:
    filename: str
    data: bytes
    size: int | None = None  # what the upload says its size is (a client may say more than it sends)


@dataclass
class SentMessage:
    """A message as users see it after every edit so far."""

    id: int
    channel_id: int
    author: dict[str, Any]
    content: str = ""
    flags: int = 0
    components: list[dict[str, Any]] = field(default_factory=list)
    embeds: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    webhook_id: int | None = None
    reference: dict[str, Any] | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    edits: int = 0

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def components_flat(self) -> list[dict[str, Any]]:
        return [c for row in self.components for c in row.get("components", [])]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [c for c in self.components_flat if c.get("type") == 2]

    def payload(self, guild_id: int | None = None) -> dict[str, Any]:
        data = payloads.message(
            self.id,
            channel_id=self.channel_id,
            content=self.content,
            author=self.author,
            timestamp=self.created_at.isoformat(),
            attachments=[
                {
                    "id": str(self.id * 10 + i),
                    "filename": a.filename,
                    "size": len(a.data),
                    "url": f"https://cdn.example/{a.filename}",
                    "proxy_url": f"https://cdn.example/{a.filename}",
                }
                for i, a in enumerate(self.attachments)
            ],
            embeds=self.embeds,
            flags=self.flags,
            components=self.components,
        )
        if self.webhook_id is not None:
            data["webhook_id"] = str(self.webhook_id)
        if self.reference is not None:
            data["message_reference"] = self.reference
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        return data


@dataclass(frozen=True)
class Request:
    """A request the bot made: method, path (from /api/v10 on), and its JSON body."""

    method: str
    path: str
    payload: Any


@dataclass
class Webhook:
    id: int
    token: str
    channel_id: int
    name: str


@dataclass
class Emoji:
    id: int
    name: str
    image: str

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "name": self.name,
            "animated": False,
            "require_colons": True,
            "managed": False,
            "available": True,
            "roles": [],
        }


@dataclass
class InteractionRecord:
    """An interaction sent to the bot, and what it answered."""

    id: int
    kind: int
    channel_id: int
    original: int | None = None  # the message a component is on, or the response message
    created: list[int] = field(default_factory=list)
    choices: list[dict[str, Any]] | None = None
    modal: dict[str, Any] | None = None


@dataclass
class Failure:
    """The next request whose "METHOD /path" matches `pattern` gets this error."""

    pattern: re.Pattern[str]
    status: int
    code: int
    message: str


@dataclass
class Invocation:
    """One interaction a user sent, and what the bot answered."""

    token: str
    discord: FakeDiscord

    @property
    def record(self) -> InteractionRecord:
        return self.discord.interactions[self.token]

    @property
    def replies(self) -> list[SentMessage]:
        """Messages this interaction created and that still exist: its response, then follow-ups."""
        return [self.discord.messages[i] for i in self.record.created if i in self.discord.messages]

    @property
    def original(self) -> SentMessage:
        """The interaction's original message (for a button press: the message the button is on)."""
        assert self.record.original is not None, "the bot did not answer"
        return self.discord.messages[self.record.original]

    @property
    def reply(self) -> SentMessage:
        """The last message this interaction produced (the answer the user reads)."""
        replies = self.replies
        return replies[-1] if replies else self.original

    @property
    def text(self) -> str:
        return self.reply.content

    @property
    def choices(self) -> list[dict[str, Any]]:
        assert self.record.choices is not None, "the bot offered no choices"
        return self.record.choices

    @property
    def modal(self) -> dict[str, Any]:
        assert self.record.modal is not None, "the bot opened no modal"
        return self.record.modal


class FakeDiscord:
    """Discord's side of one bot: see the module docstring. Use as an async context manager, then
    `start` a bot."""

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

    async def add_thread(self, thread_id: int, *, parent_id: int = CHANNEL, owner: int = 201) -> None:
        """A public thread of a channel, announced to the bot (THREAD_CREATE) when it is connected."""
        data = payloads.channel(
            thread_id,
            kind=PUBLIC_THREAD,
            guild_id=GUILD,
            name=f"thread-{thread_id}",
            parent_id=parent_id,
            recipient=payloads.user(owner),
        )
        self.threads[thread_id] = data
        if self.bot is not None:
            await self._dispatch_and_wait("THREAD_CREATE", data | {"newly_created": True}, "thread_create")

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

    # ------------------------------------------------------------------ the bot

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
        self.bot = bot
        await bot.__aenter__()  # as `personae run` enters it (`async with PersonaeBot(...)`)
        self._bot_task = asyncio.create_task(bot.start(TOKEN), name="fake-discord-bot")
        ready = asyncio.create_task(bot.wait_until_ready())
        done, _ = await asyncio.wait({ready, self._bot_task}, return_when=asyncio.FIRST_COMPLETED)
        if self._bot_task in done:
            ready.cancel()
            self._bot_task.result()  # raises the bot's error
            raise RuntimeError("the bot stopped before it was ready")
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

    # ------------------------------------------------------------------ what users do

    async def say(
        self,
        content: str,
        *,
        user: int = 201,
        channel: int | None = CHANNEL,
        dm: bool = False,
        reply_to: int | None = None,
        name: str | None = None,
        bot: bool = False,
        webhook: int | None = None,
    ) -> SentMessage:
        """A message a user sends (in a guild channel or thread, or with `dm` in their DM with the bot),
        handled by the bot; `reply_to`: the message it replies to."""
        channel_id = self.dm_channel(user) if dm else channel
        assert channel_id is not None
        message = self._store(
            content,
            channel_id=channel_id,
            author=payloads.user(user, name, bot=bot or webhook is not None),
            webhook_id=webhook,
            reference=self._reference(reply_to),
        )
        data = message.payload(None if dm else GUILD)
        if not dm:
            data["member"] = {k: v for k, v in payloads.member(user, name).items() if k != "user"}
        if reply_to is not None:
            data["referenced_message"] = self.messages[reply_to].payload(None if dm else GUILD)
        await self._dispatch_and_wait("MESSAGE_CREATE", data, "message", lambda m: m.id == message.id)
        return message

    def said_while_away(
        self,
        content: str,
        *,
        user: int = 201,
        channel: int | None = CHANNEL,
        dm: bool = False,
        ago: timedelta,
    ) -> SentMessage:
        """A message sent `ago` while the bot was not connected: in the history, no event."""
        created = datetime.now(UTC) - ago
        channel_id = self.dm_channel(user) if dm else channel
        assert channel_id is not None
        return self._store(
            content,
            channel_id=channel_id,
            author=payloads.user(user),
            message_id=discord.utils.time_snowflake(created) + next(self._ids) % 4096,
            created_at=created,
        )

    def sent_while_away(
        self, content: str, *, channel: int, name: str, webhook: int | None, ago: timedelta = timedelta(0)
    ) -> SentMessage:
        """A reply sent `ago` under a personality's name (by a webhook, or as the bot itself with
        `webhook` None) that the bot never stored: in the history without any event."""
        author = (
            payloads.user(webhook, name, bot=True)
            if webhook is not None
            else payloads.user(BOT_ID, "Personae", bot=True)
        )
        created = datetime.now(UTC) - ago
        return self._store(
            content,
            channel_id=channel,
            author=author,
            webhook_id=webhook,
            message_id=discord.utils.time_snowflake(created) + next(self._ids) % 4096,
            created_at=created,
        )

    async def command(
        self,
        path: str,
        *,
        user: int = 201,
        guild: int | None = None,
        channel: int | None = None,
        permissions: int = 0,
        expired: bool = False,
        attachments: dict[str, Attachment] | None = None,
        **options: Any,
    ) -> Invocation:
        """A slash command run by `user` (in their DM with the bot, or with `guild` in a channel of it,
        CHANNEL unless `channel` says);
        `expired`: Discord has forgotten the interaction by the time the bot answers (after 3 s);
        `attachments`: files for attachment options, uploaded as the Discord client does."""
        payload = self._interaction(2, user=user, guild=guild, channel=channel, permissions=permissions)
        payload["data"] = self._command_data(path, options, None)
        if attachments:
            payload["data"]["resolved"] = {"attachments": self._upload(payload, options, attachments)}
        if expired:
            self.expired.add(payload["token"])
        return await self._interact(payload)

    async def autocomplete(
        self, path: str, focused: str, *, user: int = 201, guild: int | None = None, **options: Any
    ) -> Invocation:
        """The user typing into the option `focused` of a command: the choices the bot offers."""
        payload = self._interaction(4, user=user, guild=guild, channel=None, permissions=0)
        payload["data"] = self._command_data(path, options, focused)
        return await self._interact(payload)

    async def message_command(self, name: str, target: SentMessage, *, user: int = 201) -> Invocation:
        """A message menu command (right-click a message, Apps) run on `target`, in its channel."""
        guild = self._guild_of(target.channel_id)
        payload = self._interaction(2, user=user, guild=guild, channel=target.channel_id, permissions=0)
        payload["data"] = {
            "id": str(APP_ID + 2),
            "name": name,
            "type": discord.AppCommandType.message.value,
            "target_id": str(target.id),
            "resolved": {"messages": {str(target.id): target.payload(guild)}},
        }
        return await self._interact(payload)

    async def click(
        self, message: SentMessage, label: str | None = None, *, index: int = 0, user: int = 201
    ) -> Invocation:
        """Press the button with this label (or the `index`th) on a message."""
        buttons = message.buttons
        button = next((b for b in buttons if b.get("label") == label), None) if label else buttons[index]
        assert button is not None, f"no button {label!r} on the message: {buttons}"
        assert not button.get("disabled"), f"the button {label!r} is disabled: a user can't press it"
        return await self._component(message, {"custom_id": button["custom_id"], "component_type": 2}, user)

    async def choose(self, message: SentMessage, values: Sequence[str], *, user: int = 201) -> Invocation:
        """Pick these option values in the (first) select menu on a message."""
        menu = next((c for c in message.components_flat if c.get("type") == 3), None)
        assert menu is not None, f"no select menu on the message: {message.components}"
        known = {o["value"] for o in menu.get("options", [])}
        assert set(values) <= known, f"{values} are not among the options {sorted(known)}"
        data = {"custom_id": menu["custom_id"], "component_type": 3, "values": list(values)}
        return await self._component(message, data, user)

    async def submit_modal(
        self,
        modal: dict[str, Any],
        values: dict[str, str],
        *,
        user: int = 201,
        message: SentMessage | None = None,
    ) -> Invocation:
        """Submit a modal the bot opened, with these values for its text inputs (by custom id);
        `message`: the message whose button opened it (Discord sends it along); else from their DM."""
        channel = message.channel_id if message is not None else None
        guild = self._guild_of(channel) if channel is not None else None
        payload = self._interaction(5, user=user, guild=guild, channel=channel, permissions=0)
        payload["data"] = {
            "custom_id": modal["custom_id"],
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": custom_id, "value": value}]}
                for custom_id, value in values.items()
            ],
        }
        if message is not None:
            payload["message"] = message.payload(guild)
            self.interactions[payload["token"]].original = message.id
        return await self._interact(payload)

    # ------------------------------------------------------------------ building events

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

    def _interaction(
        self, kind: int, *, user: int, guild: int | None, channel: int | None, permissions: int
    ) -> dict[str, Any]:
        interaction_id = self.next_id()
        token = f"token-{interaction_id}"
        channel_id = channel or (CHANNEL if guild is not None else self.dm_channel(user))
        self.interactions[token] = InteractionRecord(interaction_id, kind, channel_id)
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(APP_ID),
            "type": kind,
            "token": token,
            "version": 1,
            "locale": "en-US",
            "attachment_size_limit": 25 * 1024 * 1024,
            "app_permissions": str(discord.Permissions.all().value),
            "entitlements": [],
            "authorizing_integration_owners": {},
            "channel_id": str(channel_id),
        }
        if guild is not None:
            payload["guild_id"] = str(guild)
            payload["context"] = 0
            payload["channel"] = (
                self.channels.get(channel_id)
                or self.threads.get(channel_id)
                or payloads.channel(channel_id, kind=GUILD_TEXT, guild_id=guild, name=f"channel-{channel_id}")
            )
            payload["member"] = payloads.member(user) | {"permissions": str(permissions)}
        else:
            payload["context"] = 1
            payload["channel"] = payloads.channel(channel_id, kind=DM, recipient=payloads.user(user))
            payload["user"] = payloads.user(user)
        return payload

    def _command_data(self, path: str, options: dict[str, Any], focused: str | None) -> dict[str, Any]:
        assert self.bot is not None, "start a bot first"
        names = path.split()
        command: Any = self.bot.tree.get_command(names[0])
        assert command is not None, f"no command /{names[0]}"
        for name in names[1:]:
            command = command.get_command(name)
            assert command is not None, f"no command /{path}"
        return payloads.command_data(command, names, options, focused, APP_ID + 1)

    def _upload(
        self, payload: dict[str, Any], options: dict[str, Any], attachments: dict[str, Attachment]
    ) -> dict[str, Any]:
        """Attachment options as the Discord client uploads them: the file on the CDN, its id the value."""
        resolved = {}
        for option, attachment in attachments.items():
            attachment_id = str(self.next_id())
            path = f"attachments/{payload['channel_id']}/{attachment_id}/{attachment.filename}"
            self.files[path] = attachment.data
            url = f"{self.base_url}/cdn/{path}?ex=6f00&is=6e00&hm=ab"
            size = attachment.size if attachment.size is not None else len(attachment.data)
            resolved[attachment_id] = {
                "id": attachment_id,
                "filename": attachment.filename,
                "size": size,
                "url": url,
                "proxy_url": url,
            }
            for entry in self._leaf_options(payload["data"]):
                if entry["name"] == option:
                    entry["value"] = attachment_id
            if not any(entry["name"] == option for entry in self._leaf_options(payload["data"])):
                self._leaf_options(payload["data"]).append(
                    {"name": option, "type": 11, "value": attachment_id}
                )
        return resolved

    @staticmethod
    def _leaf_options(data: dict[str, Any]) -> list[dict[str, Any]]:
        options: list[dict[str, Any]] = data["options"]
        while options and options[0].get("type") in (1, 2):
            options = options[0].setdefault("options", [])
        return options

    async def _component(self, message: SentMessage, data: dict[str, Any], user: int) -> Invocation:
        guild = None if message.channel_id in self.dm_of.values() else GUILD
        payload = self._interaction(3, user=user, guild=guild, channel=message.channel_id, permissions=0)
        payload["data"] = data
        payload["message"] = message.payload(guild)
        self.interactions[payload["token"]].original = message.id
        return await self._interact(payload)

    async def _interact(self, payload: dict[str, Any]) -> Invocation:
        interaction_id = int(payload["id"])
        await self._dispatch_and_wait(
            "INTERACTION_CREATE", payload, "interaction", lambda i: i.id == interaction_id
        )
        return Invocation(payload["token"], self)

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

    # ------------------------------------------------------------------ the gateway

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

    def _gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.base_url.rsplit(':', 1)[1]}/gateway"

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

    async def _cdn(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["path"])
        if data is None:
            return web.json_response({"message": "Not Found", "code": 0}, status=404)
        return web.Response(body=data)

    # ------------------------------------------------------------------ the API

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        payload, files = await _read_body(request)
        self.requests.append(Request(request.method, path, payload))
        for failure in self._failures:
            if failure.pattern.fullmatch(f"{request.method} {path}"):
                self._failures.remove(failure)
                return _json({"message": failure.message, "code": failure.code}, failure.status)
        parts = [unquote(p) for p in path.strip("/").split("/")]
        status, body = self._answer(request.method, parts, payload or {}, files, request.query)
        if body is None:
            return web.Response(status=status)
        return _json(body, status)

    def _answer(
        self, method: str, parts: list[str], data: Any, files: list[Attachment], query: Any
    ) -> tuple[int, Any]:
        match parts:
            case ["users", "@me"]:
                return 200, payloads.user(BOT_ID, "Personae", bot=True) | {
                    "verified": True,
                    "mfa_enabled": False,
                }
            case ["oauth2", "applications", "@me"]:
                return 200, {
                    "id": str(APP_ID),
                    "name": "Personae",
                    "description": "",
                    "icon": None,
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "owner": payloads.user(1, "owner"),
                    "verify_key": "0" * 64,
                    "flags": 0,
                }
            case ["gateway", "bot"]:
                return 200, {
                    "url": self._gateway_url(),
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 1000,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            case ["applications", _, *rest] if rest and rest[-1] == "commands" and method == "PUT":
                commands = data if isinstance(data, list) else []
                self.synced["/".join(parts)] = commands
                return 200, [
                    {
                        "description": "",
                        **c,
                        "id": str(self.next_id()),
                        "application_id": parts[1],
                        "version": "1",
                    }
                    for c in commands
                ]
            case ["applications", _, "emojis"] if method == "POST":
                emoji = Emoji(self.next_id(), data["name"], data["image"])
                self.emojis[emoji.id] = emoji
                return 200, emoji.payload()
            case ["applications", _, "emojis", emoji_id]:
                found = self.emojis.get(int(emoji_id))
                if found is None:
                    return 404, {"message": "Unknown Emoji", "code": 10014}
                if method == "DELETE":
                    del self.emojis[found.id]
                    return 204, None
                return 200, found.payload()
            case ["interactions", _, token, "callback"]:
                if token in self.expired:
                    return 404, {"message": "Unknown interaction", "code": 10062}
                return 200, self._callback(token, data, files)
            case ["webhooks", _, token, *rest] if token in self.interactions:
                if token in self.expired:
                    return 404, {"message": "Unknown Webhook", "code": 10015}
                return self._followup(method, token, rest, data, files)
            case ["webhooks", _, token, *rest] if token in self.webhooks:
                return self._webhook(method, self.webhooks[token], rest, data, files, query)
            case ["channels", channel_id, "typing"]:
                self.typing.append(int(channel_id))
                return 204, None
            case ["channels", channel_id, "webhooks"]:
                return self._channel_webhooks(method, int(channel_id), data)
            case ["channels", channel_id, "messages", message_id, "reactions", emoji, "@me"]:
                self.reactions.append((int(channel_id), int(message_id), emoji))
                return 204, None
            case ["channels", channel_id, "messages"] if method == "GET":
                return 200, self._history(int(channel_id), query)
            case ["channels", channel_id, "messages"]:
                author = payloads.user(BOT_ID, "Personae", bot=True)
                message = self._store("", channel_id=int(channel_id), author=author)
                self._apply(message, data, files)
                return 200, message.payload(self._guild_of(message.channel_id))
            case ["channels", channel_id, "messages", message_id]:
                return self._change(method, int(message_id), data, files)
            case ["channels", channel_id]:
                channel = self.channels.get(int(channel_id)) or self.threads.get(int(channel_id))
                if channel is None and int(channel_id) in self.dm_of.values():
                    user_id = next(u for u, c in self.dm_of.items() if c == int(channel_id))
                    channel = payloads.channel(int(channel_id), kind=DM, recipient=payloads.user(user_id))
                if channel is None:
                    return 404, {"message": "Unknown Channel", "code": 10003}
                return 200, channel
        raise AssertionError(f"the fake Discord does not know {method} /{'/'.join(parts)}")

    def _guild_of(self, channel_id: int) -> int | None:
        return None if channel_id in self.dm_of.values() else GUILD

    def _apply(self, message: SentMessage, data: dict[str, Any], files: list[Attachment]) -> None:
        if "content" in data:
            message.content = data["content"] or ""
        if "components" in data:
            message.components = data["components"] or []
        if "embeds" in data:
            message.embeds = data["embeds"] or []
        if files:
            message.attachments = files
        message.flags &= ~LOADING

    def _change(
        self, method: str, message_id: int, data: dict[str, Any], files: list[Attachment]
    ) -> tuple[int, Any]:
        message = self.messages.get(message_id)
        if message is None:
            return 404, {"message": "Unknown Message", "code": 10008}
        if method == "DELETE":
            del self.messages[message_id]
            return 204, None
        if method == "PATCH":
            self._apply(message, data, files)
            message.edits += 1
        return 200, message.payload(self._guild_of(message.channel_id))

    def _history(self, channel_id: int, query: Any) -> list[dict[str, Any]]:
        """Messages of a channel, newest first, as Discord answers `after`, `before` and `limit`."""
        found = self.in_channel(channel_id)
        if "after" in query:
            found = [m for m in found if m.id > int(query["after"])][: int(query.get("limit", 50))]
        if "before" in query:
            found = [m for m in found if m.id < int(query["before"])][-int(query.get("limit", 50)) :]
        guild = self._guild_of(channel_id)
        return [m.payload(guild) for m in reversed(found)]

    def _channel_webhooks(self, method: str, channel_id: int, data: dict[str, Any]) -> tuple[int, Any]:
        channel = self.channels.get(channel_id)
        if channel is None or channel.get("permission_overwrites"):
            return 403, {"message": "Missing Permissions", "code": 50013}
        if method == "POST":
            hook = Webhook(self.next_id(), f"hook-token-{len(self.webhooks)}", channel_id, data["name"])
            self.webhooks[hook.token] = hook
            return 200, self._hook_payload(hook)
        return 200, [self._hook_payload(h) for h in self.webhooks.values() if h.channel_id == channel_id]

    @staticmethod
    def _hook_payload(hook: Webhook) -> dict[str, Any]:
        return {
            "id": str(hook.id),
            "type": 1,
            "channel_id": str(hook.channel_id),
            "guild_id": str(GUILD),
            "name": hook.name,
            "avatar": None,
            "token": hook.token,
        }

    def _webhook(
        self,
        method: str,
        hook: Webhook,
        rest: list[str],
        data: dict[str, Any],
        files: list[Attachment],
        query: Any,
    ) -> tuple[int, Any]:
        channel_id = int(query.get("thread_id", hook.channel_id))
        if not rest and method == "POST":
            author = payloads.user(hook.id, str(data.get("username") or hook.name), bot=True)
            message = self._store("", channel_id=channel_id, author=author, webhook_id=hook.id)
            message.author["discriminator"] = "0000"
            self._apply(message, data, files)
            return 200, message.payload(GUILD)
        return self._change(method, int(rest[1]), data, files)

    def _followup(
        self, method: str, token: str, rest: list[str], data: dict[str, Any], files: list[Attachment]
    ) -> tuple[int, Any]:
        record = self.interactions[token]
        if not rest and method == "POST":
            message = self._new_response(record, data, files, int(data.get("flags") or 0))
            return 200, message.payload(self._guild_of(record.channel_id))
        target = rest[1]
        message_id = record.original if target == "@original" else int(target)
        assert message_id is not None, "no original response to change"
        return self._change(method, message_id, data, files)

    def _new_response(
        self, record: InteractionRecord, data: dict[str, Any], files: list[Attachment], flags: int
    ) -> SentMessage:
        author = payloads.user(BOT_ID, "Personae", bot=True)
        message = self._store("", channel_id=record.channel_id, author=author)
        self._apply(message, data, files)
        message.flags = flags
        record.created.append(message.id)
        return message

    def _callback(self, token: str, payload: dict[str, Any], files: list[Attachment]) -> dict[str, Any]:
        record = self.interactions[token]
        kind = payload["type"]
        data = payload.get("data") or {}
        interaction: dict[str, Any] = {"id": str(record.id), "type": record.kind}
        resource: dict[str, Any] = {"type": kind}
        if kind in (4, 5):  # a message, or "thinking…" that becomes one
            flags = int(data.get("flags") or 0) | (LOADING if kind == 5 else 0)
            message = self._new_response(record, data, files, flags)
            record.original = message.id
            interaction |= {
                "response_message_id": str(message.id),
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(flags & EPHEMERAL),
            }
            resource["message"] = message.payload(self._guild_of(record.channel_id))
        elif kind in (6, 7):  # acknowledge or update the message a component is on
            assert record.original is not None
            message = self.messages[record.original]
            if kind == 7:
                self._apply(message, data, files)
                message.edits += 1
            interaction["response_message_id"] = str(message.id)
            resource["message"] = message.payload(self._guild_of(record.channel_id))
        elif kind == 8:
            record.choices = data.get("choices", [])
        elif kind == 9:
            record.modal = data
        return {"interaction": interaction, "resource": resource}


def _json(body: Any, status: int) -> web.Response:
    # Exactly Discord's content type: discord.py reads JSON only when it is exactly this.
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def _event_tasks() -> list[asyncio.Task[Any]]:
    """The tasks of the events the bot is handling now."""
    current = asyncio.current_task()
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and t is not current and t.get_name().startswith(EVENT_TASK_PREFIXES)
    ]


async def _read_body(request: web.Request) -> tuple[Any, list[Attachment]]:
    if not request.body_exists:
        return None, []
    if request.content_type.startswith("multipart/"):
        payload: Any = None
        files: list[Attachment] = []
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, aiohttp.BodyPartReader):
                continue
            if part.name == "payload_json":
                payload = json.loads(await part.text())
            else:
                files.append(Attachment(part.filename or "", bytes(await part.read())))
        return payload, files
    text = await request.text()
    return (json.loads(text) if text else None), []


@contextlib.asynccontextmanager
async def running_bot(discord_: FakeDiscord, bot: Any) -> AsyncIterator[Any]:
    """The bot started on this fake Discord for the block, then stopped."""
    await discord_.start(bot)
    try:
        yield bot
    finally:
        await discord_.stop()
