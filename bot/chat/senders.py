"""How a reply reaches a channel: through the channel's webhook under the personality's name and avatar,
or as the bot's own message with the name in bold; split under Discord's limit, nobody pinged, the view
on the last part, and put in place of an earlier reply part by part (`replace`)."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import discord

from bot.messages import DISCORD_LIMIT, split_message

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
WebhookTarget = discord.TextChannel | discord.ForumChannel | discord.VoiceChannel | discord.StageChannel


class _PartWriter(Protocol):
    """What `replace_parts` needs of a sender: one part sent, edited or deleted."""

    async def send_part(self, content: str, view: discord.ui.View | None) -> discord.Message: ...

    async def edit_part(
        self, message_id: int, content: str, view: discord.ui.View | None
    ) -> discord.Message: ...

    async def delete_part(self, message_id: int) -> None: ...


async def replace_parts(
    writer: _PartWriter, message_ids: Sequence[int], parts: Sequence[str], view: discord.ui.View | None
) -> list[discord.Message]:
    """The new parts in place of the old messages: the first ones edited, the rest sent after them,
    old messages left over deleted; `view` on the last part only (taken off the others)."""
    written = []
    for index, part in enumerate(parts):
        last_view = view if index == len(parts) - 1 else None
        if index < len(message_ids):
            written.append(await writer.edit_part(message_ids[index], part, last_view))
        else:
            written.append(await writer.send_part(part, last_view))
    for message_id in message_ids[len(parts) :]:
        await writer.delete_part(message_id)
    return written


def plain_header(name: str) -> str:
    """The line the plain sender puts before a reply: the personality's name in bold."""
    return f"**{discord.utils.escape_markdown(name)}**\n"


class _PlainWriter:
    def __init__(self, channel: discord.abc.Messageable) -> None:
        self.channel = channel

    async def send_part(self, content: str, view: discord.ui.View | None) -> discord.Message:
        if view is None:
            return await self.channel.send(content, allowed_mentions=NO_MENTIONS)
        return await self.channel.send(content, allowed_mentions=NO_MENTIONS, view=view)

    def _partial(self, message_id: int) -> discord.PartialMessage:
        return self.channel.get_partial_message(message_id)  # type: ignore[attr-defined, no-any-return]

    async def edit_part(self, message_id: int, content: str, view: discord.ui.View | None) -> discord.Message:
        return await self._partial(message_id).edit(content=content, view=view, allowed_mentions=NO_MENTIONS)

    async def delete_part(self, message_id: int) -> None:
        await self._partial(message_id).delete()


def webhook_name(bot_user: discord.ClientUser | None) -> str:
    """The name of our webhook in each channel: the bot's own, so another bot's webhooks are not ours."""
    return f"{bot_user.name} personalities" if bot_user is not None else "Personae"


class ReplySender(ABC):
    """Sends a personality's reply into a channel, or puts a new text in place of one it sent; returns
    the messages of the reply, in order, `view` on the last one. A sender says how it writes one part
    (`_writer`) and how a text is cut into parts (`_parts`)."""

    @abstractmethod
    def _writer(self, channel: discord.abc.Messageable, *, name: str, avatar_url: str | None) -> _PartWriter:
        """What writes one reply's parts into this channel, under this name and avatar."""

    def _parts(self, text: str, name: str) -> list[str]:
        return split_message(text)

    async def send(
        self,
        channel: discord.abc.Messageable,
        text: str,
        *,
        name: str,
        avatar_url: str | None,
        view: discord.ui.View | None = None,
    ) -> list[discord.Message]:
        return await self.replace(channel, [], text, name=name, avatar_url=avatar_url, view=view)

    async def replace(
        self,
        channel: discord.abc.Messageable,
        message_ids: Sequence[int],
        text: str,
        *,
        name: str,
        avatar_url: str | None,
        view: discord.ui.View | None = None,
    ) -> list[discord.Message]:
        writer = self._writer(channel, name=name, avatar_url=avatar_url)
        return await replace_parts(writer, message_ids, self._parts(text, name), view)


class PlainSender(ReplySender):
    """The bot's own messages, the personality's name in bold (no Manage Webhooks, or a DM)."""

    def _writer(self, channel: discord.abc.Messageable, *, name: str, avatar_url: str | None) -> _PartWriter:
        return _PlainWriter(channel)

    def _parts(self, text: str, name: str) -> list[str]:
        header = plain_header(name)
        parts = split_message(text, DISCORD_LIMIT - len(header))
        return [header + part if index == 0 else part for index, part in enumerate(parts)]


class WebhookSender(ReplySender):
    """One webhook per channel, named for the bot, reused; threads post through their parent's. A reply
    is replaced only through the webhook that posted it (NotFound from any other)."""

    def __init__(self, webhook_name: str) -> None:
        self.webhook_name = webhook_name
        self._webhooks: dict[int, discord.Webhook] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def webhook_for(self, channel: WebhookTarget) -> discord.Webhook:
        cached = self._webhooks.get(channel.id)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(channel.id, asyncio.Lock())
        async with lock:  # two replies at once must not create two webhooks
            cached = self._webhooks.get(channel.id)
            if cached is not None:
                return cached
            existing = [w for w in await channel.webhooks() if w.name == self.webhook_name and w.token]
            webhook = existing[0] if existing else await channel.create_webhook(name=self.webhook_name)
            self._webhooks[channel.id] = webhook
            return webhook

    async def known_webhook_id(self, channel: WebhookTarget) -> int | None:
        """The id of our webhook in this channel, if there is one (none is created to find out)."""
        cached = self._webhooks.get(channel.id)
        if cached is not None:
            return cached.id
        existing = [w for w in await channel.webhooks() if w.name == self.webhook_name and w.token]
        if not existing:
            return None
        self._webhooks[channel.id] = existing[0]
        return existing[0].id

    def forget(self, channel_id: int) -> None:
        self._webhooks.pop(channel_id, None)

    def _writer(self, channel: discord.abc.Messageable, *, name: str, avatar_url: str | None) -> _PartWriter:
        return _WebhookWriter(self, channel, name=name, avatar_url=avatar_url)


class _WebhookWriter:
    """One reply's parts through the channel's webhook (a thread's: its parent's, into the thread)."""

    def __init__(
        self, sender: WebhookSender, channel: discord.abc.Messageable, *, name: str, avatar_url: str | None
    ) -> None:
        thread = channel if isinstance(channel, discord.Thread) else None
        parent = thread.parent if thread is not None else channel
        if parent is None:
            raise TypeError("a thread without a parent cannot take webhook messages")
        self.sender = sender
        self.parent: WebhookTarget = parent  # type: ignore[assignment]
        self.thread = thread
        self.name = name
        self.avatar_url = avatar_url

    def _where(self) -> dict[str, Any]:
        return {"thread": self.thread} if self.thread is not None else {}

    async def send_part(self, content: str, view: discord.ui.View | None) -> discord.Message:
        async def send(webhook: discord.Webhook) -> discord.Message:
            return await webhook.send(
                content,
                username=self.name[:80],
                avatar_url=self.avatar_url or discord.utils.MISSING,
                allowed_mentions=NO_MENTIONS,
                wait=True,
                view=view or discord.utils.MISSING,
                **self._where(),
            )

        try:
            return await send(await self.sender.webhook_for(self.parent))
        except discord.NotFound:
            # Someone deleted our webhook: make a new one, once.
            self.sender.forget(self.parent.id)
            return await send(await self.sender.webhook_for(self.parent))

    async def edit_part(self, message_id: int, content: str, view: discord.ui.View | None) -> discord.Message:
        webhook = await self.sender.webhook_for(self.parent)
        return await webhook.edit_message(
            message_id, content=content, view=view, allowed_mentions=NO_MENTIONS, **self._where()
        )

    async def delete_part(self, message_id: int) -> None:
        webhook = await self.sender.webhook_for(self.parent)
        await webhook.delete_message(message_id, **self._where())


async def send_notice(channel: discord.abc.Messageable, text: str) -> None:
    """A short notice from the bot itself (a failure, a flood warning); one that can't be sent is logged."""
    try:
        await channel.send(text, allowed_mentions=NO_MENTIONS)
    except discord.HTTPException as exc:
        log.warning("Could not send a notice to %s: %s", getattr(channel, "id", "?"), exc)


def can_use_webhooks(channel: discord.abc.Messageable) -> bool:
    """Whether the bot may manage webhooks where it would post (a thread's parent for threads)."""
    target = channel.parent if isinstance(channel, discord.Thread) else channel
    if not isinstance(target, discord.TextChannel | discord.ForumChannel | discord.VoiceChannel):
        return False
    me = target.guild.me
    return me is not None and target.permissions_for(me).manage_webhooks


class ReplySenders:
    """The bot's two ways into a channel, one of each for the whole bot: its webhook where it may manage
    webhooks, else its own messages (a DM, a missing permission, a refused webhook)."""

    def __init__(self, webhook: ReplySender, plain: ReplySender) -> None:
        self.webhook = webhook
        self.plain = plain

    @classmethod
    def for_bot(cls, bot_user: discord.ClientUser | None) -> ReplySenders:
        return cls(WebhookSender(webhook_name(bot_user)), PlainSender())

    async def send_as(
        self,
        channel: discord.abc.Messageable,
        text: str,
        *,
        name: str,
        avatar_url: str | None,
        view: discord.ui.View | None = None,
    ) -> list[discord.Message]:
        """Send as the personality: by webhook where allowed, else (or when refused) as the bot."""
        if not can_use_webhooks(channel):
            return await self.plain.send(channel, text, name=name, avatar_url=avatar_url, view=view)
        try:
            return await self.webhook.send(channel, text, name=name, avatar_url=avatar_url, view=view)
        except discord.HTTPException as exc:
            # Any refusal (403, or 400 for a name Discord will not show, "clyde" or "discord"): as the bot.
            log.warning("Webhook refused in %s (%s); answering as the bot", getattr(channel, "id", "?"), exc)
            return await self.plain.send(channel, text, name=name, avatar_url=None, view=view)

    def that_sent(self, message: discord.Message) -> ReplySender:
        """The sender that posted this reply: only it can edit it."""
        return self.webhook if message.webhook_id else self.plain


def sent_parts(sent: Sequence[discord.Message], text: str, *, name: str) -> list[tuple[str, str]]:
    """(message id, text) per sent part, as the reply is stored: without the header the plain sender
    put on its first part, and only that (a reply may well begin with a bold line of its own)."""
    header = plain_header(name)
    parts = []
    for index, message in enumerate(sent):
        content = message.content
        if index == 0 and message.webhook_id is None:
            content = content.removeprefix(header)
        parts.append((str(message.id), content or text))
    return parts


@asynccontextmanager
async def typing_if_possible(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Show "typing…" while the body runs, when Discord lets us; a failed indicator changes nothing."""
    typing = channel.typing()
    try:
        await typing.__aenter__()
    except Exception as exc:  # a refused request or a dropped connection: answer all the same
        log.debug("No typing indicator in %s: %r", getattr(channel, "id", "?"), exc)
        yield
        return
    try:
        yield
    finally:
        try:
            await typing.__aexit__(None, None, None)
        except Exception as exc:
            log.debug("Stopping the typing indicator failed: %r", exc)
