"""How a personality's reply reaches a channel: through a webhook with its name and avatar, or, where
the bot may not manage webhooks (a DM, a missing permission), as the bot's own message under the
personality's name in bold. Model output never pings anyone. The typing indicator is best-effort:
Discord's side effects never decide whether a message is stored or answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import discord

from bot.messages import DISCORD_LIMIT, split_message

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
WebhookTarget = discord.TextChannel | discord.ForumChannel | discord.VoiceChannel | discord.StageChannel


class ReplySender(Protocol):
    """Sends a personality's reply into a channel; returns the sent messages, in order."""

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]: ...


def plain_header(name: str) -> str:
    """The line the plain sender puts before a reply: the personality's name in bold."""
    return f"**{discord.utils.escape_markdown(name)}**\n"


class PlainSender:
    """The bot's own messages, the personality's name in bold (no Manage Webhooks, or a DM)."""

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]:
        header = plain_header(name)
        parts = split_message(text, DISCORD_LIMIT - len(header))
        sent = []
        for index, part in enumerate(parts):
            content = header + part if index == 0 else part
            sent.append(await channel.send(content, allowed_mentions=NO_MENTIONS))
        return sent


class WebhookSender:
    """One webhook per channel, named for the bot, reused; threads post through their parent's."""

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

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]:
        thread = channel if isinstance(channel, discord.Thread) else None
        parent = thread.parent if thread is not None else channel
        if parent is None:
            raise TypeError("a thread without a parent cannot take webhook messages")
        kwargs: dict[str, Any] = {"thread": thread} if thread is not None else {}
        sent: list[discord.Message] = []
        for part in split_message(text):
            for attempt in range(2):
                webhook = await self.webhook_for(parent)  # type: ignore[arg-type]
                try:
                    message = await webhook.send(
                        part,
                        username=name[:80],
                        avatar_url=avatar_url or discord.utils.MISSING,
                        allowed_mentions=NO_MENTIONS,
                        wait=True,
                        **kwargs,
                    )
                except discord.NotFound:
                    # Someone deleted our webhook: make a new one, once.
                    self.forget(parent.id)  # type: ignore[union-attr]
                    if attempt:
                        raise
                    continue
                sent.append(message)
                break
        return sent


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


async def send_as(
    channel: discord.abc.Messageable,
    text: str,
    *,
    name: str,
    avatar_url: str | None,
    webhook: ReplySender,
    plain: ReplySender,
) -> list[discord.Message]:
    """Send as the personality: by webhook where allowed, else (or when refused) as the bot."""
    if not can_use_webhooks(channel):
        return await plain.send(channel, text, name=name, avatar_url=avatar_url)
    try:
        return await webhook.send(channel, text, name=name, avatar_url=avatar_url)
    except discord.Forbidden:
        log.warning("Webhook refused in %s; answering as the bot", getattr(channel, "id", "?"))
        return await plain.send(channel, text, name=name, avatar_url=None)


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
