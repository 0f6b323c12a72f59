"""What users do on the fake Discord: say things, run slash commands, press buttons, pick options and
submit modals, each sent to the bot as Discord sends it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import discord

from testkit import discord_payloads as payloads
from testkit.discord_payloads import DM, GUILD_TEXT, PUBLIC_THREAD
from testkit.fake_discord.gateway import Gateway
from testkit.fake_discord.records import (
    APP_ID,
    BOT_ID,
    CHANNEL,
    GUILD,
    Attachment,
    InteractionRecord,
    Invocation,
    SentMessage,
)


class UserActions(Gateway):
    """What users do; each returns once the bot has handled it."""

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
