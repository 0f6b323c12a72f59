"""Chat: answer the messages that address a personality, as that personality.

Thin on purpose: routing, prompts, storage and memory live in memory.chat.ChatService, the senders in
bot.senders, the flood control in bot.flood. This cog turns a discord.Message into calls on them and
hands the after-reply work (memory formation, rolling summary) to the bot's background tasks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from bot.flood import FloodControl, flood_notice
from bot.senders import NO_MENTIONS, PlainSender, ReplySender, WebhookSender, send_as, sent_parts
from bot.tasks import BackgroundTasks
from memory.chat.service import ChatRequest, ChatService

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.settings import BotSettings

log = logging.getLogger(__name__)

CATCH_UP_INTERVAL = 300.0
CATCH_UP_TASK = "chat-memory-catch-up"


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
        settings: BotSettings,
        tasks: BackgroundTasks,
        webhook_sender: ReplySender | None = None,
        plain_sender: ReplySender | None = None,
    ) -> None:
        self.bot = bot
        self.chat = chat
        self.settings = settings
        self.tasks = tasks
        self.flood = FloodControl(settings.cooldown_messages, settings.cooldown_seconds)
        self.webhook_sender: ReplySender = webhook_sender or WebhookSender(self._webhook_name())
        self.plain_sender: ReplySender = plain_sender or PlainSender()
        self._catch_up: asyncio.Task[Any] | None = None

    def _webhook_name(self) -> str:
        user = self.bot.user
        return f"{user.name} personalities" if user is not None else "Personae"

    # ------------------------------------------------------------------ background work

    async def cog_load(self) -> None:
        # Exchanges stored but not remembered before a crash or restart are formed now, then on a timer
        # (which also retries formation that failed after a reply).
        self._catch_up = self.tasks.spawn(self._catch_up_loop(), name=CATCH_UP_TASK)

    async def cog_unload(self) -> None:
        if self._catch_up is not None:
            self._catch_up.cancel()

    async def catch_up(self) -> int:
        """Form every pending memory (work left by a crash, a restart or a failed pass); returns how many."""
        memory = self.chat.memory
        if memory is None:
            return 0
        report = await memory.form_pending()
        if report.memories:
            log.info("Caught up on %d pending memories", report.memories)
        return report.memories

    async def _catch_up_loop(self) -> None:
        while True:
            try:
                await self.catch_up()
            except Exception:
                log.exception("Catching up on pending memory formation failed; retrying later")
            await asyncio.sleep(CATCH_UP_INTERVAL)

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
        refusal = self.flood.hit(message)
        if refusal is not None:
            if refusal.notify:
                notice = flood_notice(message.author.display_name, refusal.retry_after)
                await message.channel.send(notice, allowed_mentions=NO_MENTIONS)
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
        sent = await send_as(
            message.channel,
            reply.text,
            name=personality.display_name,
            avatar_url=personality.avatar_url,
            webhook=self.webhook_sender,
            plain=self.plain_sender,
        )
        if reply.ok:
            await self.chat.record_reply(reply, sent_parts(sent, reply.text))
            self.tasks.spawn(
                self._after_reply(message, prepared.conversation_id), name=f"after-reply-{message.id}"
            )


async def setup(bot: PersonaeBot) -> None:
    runtime = bot.runtime
    await bot.add_cog(ChatCog(bot, runtime.chat, settings=runtime.settings, tasks=bot.background))
