"""The fake Discord's HTTP API (from /api/v10 on) and its CDN: what the bot asks, answered as Discord
answers it, and kept."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import aiohttp
from aiohttp import web

from testkit import discord_payloads as payloads
from testkit.discord_payloads import DM, EPHEMERAL, LOADING
from testkit.fake_discord.records import (
    APP_ID,
    BOT_ID,
    GUILD,
    Attachment,
    Emoji,
    InteractionRecord,
    Request,
    SentMessage,
    Webhook,
)
from testkit.fake_discord.state import DiscordState


class RestApi(DiscordState):
    """The routes of Discord's API the bot uses."""

    async def _cdn(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["path"])
        if data is None:
            return web.json_response({"message": "Not Found", "code": 0}, status=404)
        return web.Response(body=data)

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
