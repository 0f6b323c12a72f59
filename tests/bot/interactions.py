"""Drive the real command tree with real `discord.Interaction` objects built from gateway payloads.

Only the HTTP session under the bot's `HTTPClient` is replaced: every request discord.py makes to
answer an interaction (callbacks, follow-ups, edits of the original response) goes through
`FakeDiscordHTTP`, which records it and answers like Discord does, keeping the messages users would
see. Option parsing, autocomplete, checks, ephemeral flags, views and modals all run for real.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
import discord
from discord import app_commands

SLASH_COMMAND_EXTENSIONS = ("bot.memory", "bot.personality")
APP_ID = 700000000000000001
BOT_USER_ID = 700000000000000002
EPHEMERAL = 1 << 6
LOADING = 1 << 7
MANAGE_CHANNELS = 1 << 4
# Tasks that belong to an interaction and are awaited before a harness call returns; view timeouts
# (unnamed, minutes long) are not among them.
AWAITED_TASK_PREFIXES = ("discord-ui-view-dispatch", "discord-ui-modal-dispatch", "personae-", "discord.py:")


@dataclass
class Attachment:
    filename: str
    data: bytes


@dataclass
class SentMessage:
    """A message as the user sees it after every edit so far."""

    id: int
    channel_id: int
    content: str = ""
    flags: int = 0
    components: list[dict[str, Any]] = field(default_factory=list)
    embeds: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
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

    def payload(self) -> dict[str, Any]:
        author = {
            "id": str(BOT_USER_ID),
            "username": "Personae",
            "discriminator": "0",
            "avatar": None,
            "bot": True,
        }
        return message_dict(
            self.id,
            channel=self.channel_id,
            content=self.content,
            author=author,
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


def message_dict(
    message_id: int, *, channel: int, content: str, author: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    """A message payload as Discord sends it; `fields` add to or replace the plain defaults."""
    return {
        "id": str(message_id),
        "channel_id": str(channel),
        "type": 0,
        "content": content,
        "author": author,
        "attachments": [],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "pinned": False,
        "mention_everyone": False,
        "tts": False,
        "timestamp": "2024-01-01T00:00:00+00:00",
        "edited_timestamp": None,
        "flags": 0,
        "components": [],
        **fields,
    }


@dataclass
class CapturedRequest:
    method: str
    path: str
    payload: Any
    files: list[Attachment]


class _Response:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self._text = "" if body is None else json.dumps(body)
        self.headers = {"content-type": "application/json"} if body is not None else {}
        self.reason = "OK" if status < 400 else "Not Found"

    async def text(self, encoding: str = "utf-8") -> str:
        return self._text

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def _read_body(data: Any) -> tuple[Any, list[Attachment]]:
    if data is None:
        return None, []
    if isinstance(data, str | bytes):
        return json.loads(data), []
    assert isinstance(data, aiohttp.FormData)
    payload: dict[str, Any] | None = None
    files: list[Attachment] = []
    for options, _headers, value in data._fields:
        if options.get("name") == "payload_json":
            payload = json.loads(value)
        else:
            value.seek(0)
            files.append(Attachment(options.get("filename") or "", value.read()))
    return payload, files


class FakeDiscordHTTP:
    """Stands in for the aiohttp session of the bot's HTTPClient; answers as Discord would."""

    def __init__(self) -> None:
        self.requests: list[CapturedRequest] = []
        self.messages: dict[int, SentMessage] = {}
        self.original_by_token: dict[str, int] = {}
        self.channel_by_token: dict[str, int] = {}
        self.interaction_types: dict[int, int] = {}
        self.created_by_token: dict[str, list[int]] = {}
        self.synced: dict[str, list[dict[str, Any]]] = {}
        self.autocomplete: dict[str, list[dict[str, Any]]] = {}
        self.modals: dict[str, dict[str, Any]] = {}
        # (channel id, message id, emoji) of every reaction the bot added.
        self.reactions: list[tuple[int, int, str]] = []
        self._ids = itertools.count(800000000000000001)
        self.closed = False
        # Interaction tokens Discord no longer knows: answered after its 3 s, or already gone.
        self.expired: set[str] = set()

    def next_id(self) -> int:
        return next(self._ids)

    def request(self, method: str, url: str, **kwargs: Any) -> _Response:
        path = urlsplit(url).path.removeprefix("/api/v10")
        payload, files = _read_body(kwargs.get("data"))
        self.requests.append(CapturedRequest(method, path, payload, files))
        return _Response(*self._answer(method, path.strip("/").split("/"), payload or {}, files))

    async def close(self) -> None:
        self.closed = True

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

    def _new_message(
        self, token: str, data: dict[str, Any], files: list[Attachment], flags: int
    ) -> SentMessage:
        message = SentMessage(id=self.next_id(), channel_id=self.channel_by_token[token], flags=flags)
        self._apply(message, data, files)
        message.flags = flags
        self.messages[message.id] = message
        self.created_by_token.setdefault(token, []).append(message.id)
        return message

    def _answer(
        self, method: str, parts: list[str], payload: Any, files: list[Attachment]
    ) -> tuple[int, Any]:
        if parts[0] == "interactions" and parts[2] in self.expired:
            return 404, {"message": "Unknown interaction", "code": 10062}
        if parts[0] == "webhooks" and parts[2] in self.expired:
            return 404, {"message": "Unknown Webhook", "code": 10015}
        if parts[0] == "interactions" and parts[-1] == "callback":
            return 200, self._callback(int(parts[1]), parts[2], payload, files)
        if parts[0] == "webhooks":
            token = parts[2]
            if len(parts) == 3 and method == "POST":
                data = payload
                message = self._new_message(token, data, files, int(data.get("flags") or 0))
                return 200, message.payload()
            target = parts[4]
            message_id = self.original_by_token[token] if target == "@original" else int(target)
            message = self.messages[message_id]
            if method == "PATCH":
                self._apply(message, payload, files)
                message.edits += 1
            elif method == "DELETE":
                del self.messages[message_id]
                return 204, None
            return 200, message.payload()
        if parts[0] == "channels" and parts[4:5] == ["reactions"] and method == "PUT":
            self.reactions.append((int(parts[1]), int(parts[3]), unquote(parts[5])))
            return 204, None
        if parts[0] == "applications" and parts[-1] == "commands" and method == "PUT":
            # Bulk overwrite, globally or for one guild: Discord answers with the commands, ids added
            # (and an empty description for context menus, which are sent without one).
            commands = payload if isinstance(payload, list) else []
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
        raise AssertionError(f"unexpected Discord request {method} /{'/'.join(parts)}")

    def _callback(
        self, interaction_id: int, token: str, payload: dict[str, Any], files: list[Attachment]
    ) -> dict[str, Any]:
        kind = payload["type"]
        data = payload.get("data") or {}
        interaction: dict[str, Any] = {
            "id": str(interaction_id),
            "type": self.interaction_types[interaction_id],
        }
        resource: dict[str, Any] = {"type": kind}
        if kind in (4, 5):  # a message, or "thinking…" that becomes one
            flags = int(data.get("flags") or 0) | (LOADING if kind == 5 else 0)
            message = self._new_message(token, data, files, flags)
            self.original_by_token[token] = message.id
            interaction |= {
                "response_message_id": str(message.id),
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(flags & EPHEMERAL),
            }
            resource["message"] = message.payload()
        elif kind in (6, 7):  # acknowledge or update the message a component is on
            message = self.messages[self.original_by_token[token]]
            if kind == 7:
                self._apply(message, data, files)
                message.edits += 1
            interaction["response_message_id"] = str(message.id)
            resource["message"] = message.payload()
        elif kind == 8:
            self.autocomplete[token] = data.get("choices", [])
        elif kind == 9:
            self.modals[token] = data
        return {"interaction": interaction, "resource": resource}


@dataclass
class Invocation:
    """One interaction sent to the bot, and what the bot answered."""

    token: str
    http: FakeDiscordHTTP
    interaction: discord.Interaction[Any]

    @property
    def replies(self) -> list[SentMessage]:
        """Messages this interaction created and that still exist: its response, then follow-ups."""
        ids = self.http.created_by_token.get(self.token, [])
        return [self.http.messages[i] for i in ids if i in self.http.messages]

    @property
    def original(self) -> SentMessage:
        """The interaction's original message (for a button press: the message the button is on)."""
        return self.http.messages[self.http.original_by_token[self.token]]

    @property
    def reply(self) -> SentMessage:
        """The last message this interaction produced (the answer the user reads)."""
        replies = self.replies
        if replies:
            return replies[-1]
        assert self.token in self.http.original_by_token, "the bot did not answer"
        return self.original

    @property
    def text(self) -> str:
        return self.reply.content

    @property
    def choices(self) -> list[dict[str, Any]]:
        return self.http.autocomplete[self.token]

    @property
    def modal(self) -> dict[str, Any]:
        return self.http.modals[self.token]


class DiscordHarness:
    """Builds interaction payloads for a bot whose extensions are loaded, and runs them."""

    def __init__(self, bot: discord.Client, tree: app_commands.CommandTree[Any]) -> None:
        self.bot = bot
        self.tree = tree
        self.http = FakeDiscordHTTP()
        # What HTTPClient.static_login would have set up, minus the network.
        bot.http._HTTPClient__session = self.http  # type: ignore[attr-defined]
        bot.http._global_over = asyncio.Event()
        bot.http._global_over.set()
        bot.http.token = "test-token"
        # What READY would have set after a login.
        state = bot._connection
        state.user = discord.ClientUser(
            state=state,
            data={
                "id": str(BOT_USER_ID),
                "username": "Personae",
                "discriminator": "0",
                "avatar": None,
                "bot": True,
                "verified": True,
                "mfa_enabled": False,
            },
        )
        state.application_id = APP_ID
        self._ids = itertools.count(600000000000000001)

    # ------------------------------------------------------------------ payload parts

    @staticmethod
    def user_payload(user_id: int) -> dict[str, Any]:
        return {"id": str(user_id), "username": f"user{user_id}", "discriminator": "0", "avatar": None}

    def _base(
        self, kind: int, *, user: int, guild: int | None, channel: int, permissions: int
    ) -> dict[str, Any]:
        interaction_id = next(self._ids)
        token = f"token-{interaction_id}"
        self.http.interaction_types[interaction_id] = kind
        self.http.channel_by_token[token] = channel
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
            "channel_id": str(channel),
        }
        if guild is not None:
            payload["guild_id"] = str(guild)
            payload["context"] = 0
            payload["channel"] = {
                "id": str(channel),
                "type": 0,
                "guild_id": str(guild),
                "name": "general",
                "position": 0,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
            }
            payload["member"] = {
                "user": self.user_payload(user),
                "roles": [],
                "joined_at": "2024-01-01T00:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": str(permissions),
            }
        else:
            payload["context"] = 1
            payload["channel"] = {"id": str(channel), "type": 1, "recipients": [self.user_payload(user)]}
            payload["user"] = self.user_payload(user)
        return payload

    @classmethod
    def message_payload(
        cls,
        message_id: int,
        *,
        channel: int,
        content: str,
        author: int,
        webhook: str | None = None,
        guild: int | None = None,
    ) -> dict[str, Any]:
        """A message as Discord sends it: a user's, or (webhook: its name) a personality's webhook post."""
        if webhook is None:
            sender = cls.user_payload(author)
        else:
            sender = {
                "id": str(author),
                "username": webhook,
                "discriminator": "0000",
                "avatar": None,
                "bot": True,
            }
        payload = message_dict(message_id, channel=channel, content=content, author=sender)
        if webhook is not None:
            payload["webhook_id"] = str(author)
        if guild is not None:
            payload["guild_id"] = str(guild)
        return payload

    def _command_options(self, path: str, options: dict[str, Any], focused: str | None) -> dict[str, Any]:
        names = path.split()
        command: Any = self.tree.get_command(names[0])
        assert command is not None, f"no command /{names[0]}"
        for name in names[1:]:
            command = command.get_command(name)
            assert command is not None, f"no command /{path}"
        params = {p.display_name: p for p in command.parameters}
        leaf = []
        for name, value in options.items():
            assert name in params, f"/{path} has no option {name!r}"
            option: dict[str, Any] = {"name": name, "type": params[name].type.value, "value": value}
            if name == focused:
                option["focused"] = True
            leaf.append(option)
        nested: list[dict[str, Any]] = leaf
        for depth in range(len(names) - 1, 0, -1):
            nested = [{"name": names[depth], "type": 1 if depth == len(names) - 1 else 2, "options": nested}]
        return {"id": str(APP_ID + 1), "name": names[0], "type": 1, "options": nested}

    # ------------------------------------------------------------------------ running

    async def _settle(self, before: set[asyncio.Task[Any]]) -> None:
        """Wait for the tasks this interaction started (button handlers, background jobs)."""
        while True:
            pending = [
                t
                for t in asyncio.all_tasks() - before
                if not t.done() and t.get_name().startswith(AWAITED_TASK_PREFIXES)
            ]
            if not pending:
                return
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 120)

    async def command(
        self,
        path: str,
        *,
        user: int,
        guild: int | None = None,
        channel: int = 500,
        permissions: int = 0,
        expired: bool = False,
        **options: Any,
    ) -> Invocation:
        """Invoke `/path` with these options through `CommandTree._call`, as the gateway would;
        `expired`: Discord has forgotten the interaction by the time the bot answers (after 3 s)."""
        payload = self._base(2, user=user, guild=guild, channel=channel, permissions=permissions)
        payload["data"] = self._command_options(path, options, None)
        if expired:
            self.http.expired.add(payload["token"])
        return await self._run_command(payload)

    async def autocomplete(
        self,
        path: str,
        focused: str,
        *,
        user: int,
        guild: int | None = None,
        channel: int = 500,
        **options: Any,
    ) -> Invocation:
        payload = self._base(4, user=user, guild=guild, channel=channel, permissions=0)
        payload["data"] = self._command_options(path, options, focused)
        return await self._run_command(payload)

    async def message_command(
        self, name: str, target: dict[str, Any], *, user: int, guild: int | None = None
    ) -> Invocation:
        """Invoke the message context-menu command `name` (right-click, Apps) on `target`, a message
        payload (`message_payload`), in its channel; Discord resolves the message into the data."""
        channel = int(target["channel_id"])
        payload = self._base(2, user=user, guild=guild, channel=channel, permissions=0)
        menu = self.tree.get_command(name, type=discord.AppCommandType.message)
        assert menu is not None, f"no message command {name!r}"
        payload["data"] = {
            "id": str(APP_ID + 2),
            "name": name,
            "type": discord.AppCommandType.message.value,
            "target_id": target["id"],
            "resolved": {"messages": {target["id"]: target}},
        }
        return await self._run_command(payload)

    async def _run_command(self, payload: dict[str, Any]) -> Invocation:
        interaction: discord.Interaction[Any] = discord.Interaction(data=payload, state=self.bot._connection)
        before = asyncio.all_tasks()
        try:
            await self.tree._call(interaction)
        except app_commands.AppCommandError as error:  # what CommandTree._from_interaction does
            await self.tree._dispatch_error(interaction, error)
        await self._settle(before)
        return Invocation(payload["token"], self.http, interaction)

    async def click(
        self, message: SentMessage, label: str, *, user: int, guild: int | None = None
    ) -> Invocation:
        """Press the button with this label on a message, through the bot's view store."""
        button = next((b for b in message.buttons if b.get("label") == label), None)
        assert button is not None, f"no button {label!r} on the message: {message.buttons}"
        assert not button.get("disabled"), f"the button {label!r} is disabled: a user can't press it"
        payload = self._base(3, user=user, guild=guild, channel=message.channel_id, permissions=0)
        payload["data"] = {"custom_id": button["custom_id"], "component_type": 2}
        payload["message"] = message.payload()
        self.http.original_by_token[payload["token"]] = message.id
        return await self._dispatch(payload)

    async def choose(
        self, message: SentMessage, values: Sequence[str], *, user: int, guild: int | None = None
    ) -> Invocation:
        """Pick these option values in the (first) select menu on a message, through the view store."""
        menu = next((c for c in message.components_flat if c.get("type") == 3), None)
        assert menu is not None, f"no select menu on the message: {message.components}"
        known = {o["value"] for o in menu.get("options", [])}
        assert set(values) <= known, f"{values} are not among the options {sorted(known)}"
        payload = self._base(3, user=user, guild=guild, channel=message.channel_id, permissions=0)
        payload["data"] = {"custom_id": menu["custom_id"], "component_type": 3, "values": list(values)}
        payload["message"] = message.payload()
        self.http.original_by_token[payload["token"]] = message.id
        return await self._dispatch(payload)

    async def submit_modal(
        self,
        modal: dict[str, Any],
        values: dict[str, str],
        *,
        user: int,
        guild: int | None = None,
        message: SentMessage | None = None,
    ) -> Invocation:
        """Submit a modal the bot sent, with these values for its text inputs (by custom id);
        `message`: the message whose button opened it (Discord sends it along, so it can be edited)."""
        channel = message.channel_id if message is not None else 500
        payload = self._base(5, user=user, guild=guild, channel=channel, permissions=0)
        payload["data"] = {
            "custom_id": modal["custom_id"],
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": custom_id, "value": value}]}
                for custom_id, value in values.items()
            ],
        }
        if message is not None:
            payload["message"] = message.payload()
            self.http.original_by_token[payload["token"]] = message.id
        return await self._dispatch(payload)

    async def _dispatch(self, payload: dict[str, Any]) -> Invocation:
        before = asyncio.all_tasks()
        self.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        await self._settle(before)
        interaction = discord.Interaction(data=payload, state=self.bot._connection)
        return Invocation(payload["token"], self.http, interaction)


@asynccontextmanager
async def open_harness(
    runtime: Any, extensions: Sequence[str] = SLASH_COMMAND_EXTENSIONS
) -> AsyncIterator[DiscordHarness]:
    """A PersonaeBot on this runtime with only these extensions loaded (the chat cog's background
    catch-up would share the test's database connection), wired to a fake Discord HTTP session."""
    from bot.client import PersonaeBot

    async with PersonaeBot(runtime=runtime) as bot:
        for extension in extensions:
            await bot.load_extension(extension)
        yield DiscordHarness(bot, bot.tree)
