"""Chat: route messages to personalities and answer through webhooks with their name and avatar.

Thin on purpose: routing, prompts, storage and memory live in memory.chat.ChatService. This cog turns a
discord.Message into one call on it, sends the reply, and schedules the after-reply work (memory
formation, rolling summary) in tracked background tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import discord
from discord.ext import commands

from bot.messages import DISCORD_LIMIT, split_message
from memory.chat.service import ChatRequest, ChatService, Cooldown

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from memory.settings import Settings

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
CATCH_UP_INTERVAL = 300.0
CATCH_UP_TASK = "chat-memory-catch-up"
WebhookTarget = discord.TextChannel | discord.ForumChannel | discord.VoiceChannel | discord.StageChannel


class ReplySender(Protocol):
    """Sends a personality's reply into a channel; returns the sent messages, in order."""

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]: ...


class PlainSender:
    """The bot's own messages, the personality's name in bold (no Manage Webhooks, or a DM)."""

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]:
        header = f"**{discord.utils.escape_markdown(name)}**\n"
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

    def forget(self, channel_id: int) -> None:
        self._webhooks.pop(channel_id, None)

    async def send(
        self, channel: discord.abc.Messageable, text: str, *, name: str, avatar_url: str | None
    ) -> list[discord.Message]:
        thread = channel if isinstance(channel, discord.Thread) else None
        parent = thread.parent if thread is not None else channel
        if parent is None:
            raise TypeError("a thread without a parent cannot take webhook messages")
        parts = split_message(text)
        sent: list[discord.Message] = []
        for part in parts:
            for attempt in range(2):
                webhook = await self.webhook_for(parent)  # type: ignore[arg-type]
                try:
                    kwargs: dict[str, Any] = {"thread": thread} if thread is not None else {}
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


def can_use_webhooks(channel: discord.abc.Messageable) -> bool:
    """Whether the bot may manage webhooks where it would post (a thread's parent for threads)."""
    target = channel.parent if isinstance(channel, discord.Thread) else channel
    if not isinstance(target, discord.TextChannel | discord.ForumChannel | discord.VoiceChannel):
        return False
    me = target.guild.me
    return me is not None and target.permissions_for(me).manage_webhooks


def channel_ids_of(channel: Any) -> list[str]:
    """The channel and, for a thread, its parent: a thread inherits its parent's bindings."""
    ids = [str(channel.id)]
    parent_id = getattr(channel, "parent_id", None)
    if isinstance(channel, discord.Thread) and parent_id is not None:
        ids.append(str(parent_id))
    return ids


class ChatCog(commands.Cog):
    """Answers messages that address a personality."""

    def __init__(
        self,
        bot: commands.Bot,
        chat: ChatService,
        *,
        settings: Settings,
        webhook_sender: ReplySender | None = None,
        plain_sender: ReplySender | None = None,
        catch_up_interval: float | None = CATCH_UP_INTERVAL,
    ) -> None:
        self.bot = bot
        self.chat = chat
        self.settings = settings
        self.cooldown = Cooldown(settings.cooldown_messages, settings.cooldown_seconds)
        self.webhook_sender: ReplySender = webhook_sender or WebhookSender(self._webhook_name())
        self.plain_sender: ReplySender = plain_sender or PlainSender()
        self.catch_up_interval = catch_up_interval
        self._tasks: set[asyncio.Task[Any]] = set()

    def _webhook_name(self) -> str:
        user = self.bot.user
        return f"{user.name} personalities" if user is not None else "Personae"

    # ------------------------------------------------------------------ background work

    async def cog_load(self) -> None:
        # Exchanges stored but not remembered before a crash or restart are formed now, then on a timer
        # (which also retries formation that failed after a reply).
        if self.catch_up_interval is not None:
            self.spawn(self._catch_up_loop(self.catch_up_interval), name=CATCH_UP_TASK)

    async def cog_unload(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def spawn(self, coroutine: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run work in the background, tracked so unload cancels it and failures are logged."""
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("Background task %s failed", task.get_name(), exc_info=error)

    async def wait_idle(self) -> None:
        """Wait for the after-reply work in flight (tests, shutdown); the catch-up loop is not waited on."""
        while pending := [t for t in self._tasks if t.get_name() != CATCH_UP_TASK]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def catch_up(self) -> int:
        """Form every pending memory (work left by a crash, a restart or a failed pass); returns how many."""
        memory = self.chat.memory
        if memory is None:
            return 0
        report = await memory.form_pending()
        if report.memories:
            log.info("Caught up on %d pending memories", report.memories)
        return report.memories

    async def _catch_up_loop(self, interval: float) -> None:
        while True:
            try:
                await self.catch_up()
            except Exception:
                log.exception("Catching up on pending memory formation failed; retrying later")
            await asyncio.sleep(interval)

    async def _after_reply(self, message: discord.Message, conversation_id: int) -> None:
        report = await self.chat.after_reply(conversation_id)
        emoji = self.settings.remembered_reaction
        if not emoji:
            return
        for external_id in report.remembered_message_ids:
            if not external_id.isdigit():
                continue
            target: discord.Message | discord.PartialMessage = (
                message
                if external_id == str(message.id)
                else message.channel.get_partial_message(int(external_id))  # type: ignore[union-attr]
            )
            try:
                await target.add_reaction(emoji)
            except discord.HTTPException as exc:
                log.debug("Could not react to %s: %s", external_id, exc)

    # ------------------------------------------------------------------------- events

    def is_ignored(self, message: discord.Message) -> bool:
        """Other bots, webhooks (ours included) and the bot itself never get an answer: no loops."""
        if message.author.bot or message.webhook_id is not None:
            return True
        me = self.bot.user
        return me is not None and message.author.id == me.id

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if self.is_ignored(message) or not message.content.strip():
            return
        reference = message.reference
        route = await self.chat.route(
            message.content,
            channel_ids=channel_ids_of(message.channel),
            reply_to_message_id=str(reference.message_id) if reference and reference.message_id else None,
        )
        if route is None:
            return
        allowed, notify = self.cooldown.hit(str(message.author.id))
        if not allowed:
            if notify:
                wait = self.cooldown.retry_after(str(message.author.id))
                await message.channel.send(
                    f"{message.author.display_name}, you're sending messages a little fast; "
                    f"please wait {wait:.0f} s before the next one.",
                    allowed_mentions=NO_MENTIONS,
                )
            return
        request = ChatRequest(
            personality_id=route.personality.id,
            user_id=str(message.author.id),
            user_name=message.author.display_name,
            guild_id=str(message.guild.id) if message.guild else None,
            channel_id=str(message.channel.id),
            message_id=str(message.id),
            text=message.content,
            created_at=message.created_at,
        )
        async with message.channel.typing():
            prepared = await self.chat.prepare(request)
            reply = await self.chat.generate(prepared)
        personality = prepared.personality
        sender = self.webhook_sender if can_use_webhooks(message.channel) else self.plain_sender
        try:
            sent = await sender.send(
                message.channel, reply.text, name=personality.display_name, avatar_url=personality.avatar_url
            )
        except discord.Forbidden:
            if sender is self.plain_sender:
                raise
            log.warning("Webhook refused in %s; answering as the bot", message.channel.id)
            sent = await self.plain_sender.send(
                message.channel, reply.text, name=personality.display_name, avatar_url=None
            )
        if reply.ok:
            parts = _sent_parts(sent, reply.text)
            await self.chat.record_reply(reply, parts)
            self.spawn(self._after_reply(message, prepared.conversation_id), name=f"after-reply-{message.id}")


def _sent_parts(sent: Sequence[discord.Message], text: str) -> list[tuple[str, str]]:
    """(message id, text) per sent part; the bold-name header of the plain sender is not stored."""
    parts = []
    for index, message in enumerate(sent):
        content = message.content
        if index == 0 and content.startswith("**") and "**\n" in content:
            content = content.split("**\n", 1)[1]
        parts.append((str(message.id), content or text))
    return parts


async def setup(bot: PersonaeBot) -> None:
    chat = bot.runtime.chat
    if chat is None:
        log.warning("No chat service in the runtime (built without memory): the bot will not chat")
        return
    await bot.add_cog(ChatCog(bot, chat, settings=bot.runtime.settings))


__all__ = ["ChatCog", "PlainSender", "ReplySender", "WebhookSender", "setup"]
