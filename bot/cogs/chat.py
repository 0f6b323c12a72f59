"""Chat: answer the messages that address a personality, as that personality.

Thin on purpose: routing, prompts, storage and memory live in memory.chat.ChatService, the senders in
bot.senders, the flood control in bot.flood, the catching up (pending memories, missed messages) in
bot.catch_up, the 🔄 button of the latest reply in bot.regenerate. This cog turns a discord.Message into
calls on them and hands the after-reply work (memory formation, rolling summary) to the bot's background
tasks. A message is stored before anything Discord does (typing, sending, reacting) can fail; a failure
is a short notice and a logged error.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from bot.catch_up import MissedMessages, PendingMemories
from bot.flood import FloodControl, flood_notice
from bot.reactions import react_remembered
from bot.regenerate import RegenerateButton, regenerate_view
from bot.senders import (
    PlainSender,
    ReplySender,
    WebhookSender,
    send_as,
    send_notice,
    sent_parts,
    typing_if_possible,
    webhook_name,
)
from bot.tasks import BackgroundTasks
from memory.chat.routing import Route
from memory.chat.service import ChatRequest, ChatService

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from bot.client import PersonaeBot
    from bot.settings import BotSettings

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, I couldn't answer that just now; the problem has been logged."


def channel_ids_of(channel: Any) -> list[str]:
    """The channel and, for a thread, its parent: a thread inherits its parent's bindings."""
    ids = [str(channel.id)]
    parent_id = getattr(channel, "parent_id", None)
    if isinstance(channel, discord.Thread) and parent_id is not None:
        ids.append(str(parent_id))
    return ids


class ChatCog(commands.Cog):
    """Answers messages that address a personality, and those it missed while offline."""

    def __init__(
        self,
        bot: commands.AutoShardedBot,
        chat: ChatService,
        *,
        settings: BotSettings,
        tasks: BackgroundTasks,
        sessionmaker: async_sessionmaker[AsyncSession],
        webhook_sender: ReplySender | None = None,
        plain_sender: ReplySender | None = None,
    ) -> None:
        self.bot = bot
        self.chat = chat
        self.settings = settings
        self.tasks = tasks
        self.flood = FloodControl(settings.cooldown_messages, settings.cooldown_seconds)
        self.webhook_sender: ReplySender = webhook_sender or WebhookSender(webhook_name(bot.user))
        self.plain_sender: ReplySender = plain_sender or PlainSender()
        self.sessionmaker = sessionmaker
        self.pending = PendingMemories(self)
        self.missed = MissedMessages(self)

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(RegenerateButton)  # the buttons of replies sent before a restart too
        self.pending.start()

    async def cog_unload(self) -> None:
        self.bot.remove_dynamic_items(RegenerateButton)
        self.pending.stop()

    async def catch_up(self) -> int:
        """Form every pending memory now (see PendingMemories); returns how many."""
        return await self.pending.form()

    async def after_reply(self, channel_id: int, conversation_id: int) -> None:
        """Form the conversation's memories and mark its remembered messages (background work)."""
        report = await self.chat.after_reply(conversation_id)
        remembered = [(str(channel_id), i) for i in report.remembered_message_ids]
        await react_remembered(self.bot, remembered, self.settings.remembered_reaction)

    @commands.Cog.listener("on_ready")
    @commands.Cog.listener("on_resumed")
    async def read_missed(self) -> None:
        """On every (re)connect: read back what was said while the bot was away (bot.catch_up)."""
        self.missed.read_soon()

    def is_ignored(self, message: discord.Message) -> bool:
        """Other bots, webhooks (ours included) and the bot itself never get an answer: no loops."""
        if message.author.bot or message.webhook_id is not None:
            return True
        me = self.bot.user
        return me is not None and message.author.id == me.id

    async def route(self, message: discord.Message) -> Route | None:
        """The personality this message addresses, if any (ignored messages address nobody)."""
        if self.is_ignored(message) or not message.content.strip():
            return None
        reference = message.reference
        return await self.chat.route(
            message.content,
            channel_ids=channel_ids_of(message.channel),
            reply_to_message_id=str(reference.message_id) if reference and reference.message_id else None,
        )

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        try:
            route = await self.route(message)
        except Exception:
            log.exception("Routing message %s failed", message.id)
            await send_notice(message.channel, FAILURE_NOTICE)
            return
        if route is None:
            return
        refusal = self.flood.hit(message)
        if refusal is not None:
            if refusal.notify:
                await send_notice(
                    message.channel, flood_notice(message.author.display_name, refusal.retry_after)
                )
            return
        await self.answer(message, route)

    def request_of(self, message: discord.Message, route: Route) -> ChatRequest:
        return ChatRequest(
            personality_id=route.personality.id,
            user_id=str(message.author.id),
            user_name=message.author.display_name,
            guild_id=str(message.guild.id) if message.guild else None,
            channel_id=str(message.channel.id),
            message_id=str(message.id),
            text=message.content,
            created_at=message.created_at,
        )

    async def answer(self, message: discord.Message, route: Route) -> None:
        """Store the message, then answer it as the personality; a failure is a notice, not silence."""
        sent: list[discord.Message] = []
        try:
            # Stored first: nothing Discord does (the typing indicator included) may lose the message.
            prepared = await self.chat.prepare(self.request_of(message, route))
            async with typing_if_possible(message.channel):
                reply = await self.chat.generate(prepared)
            personality = prepared.personality
            sent = await send_as(
                message.channel,
                reply.text,
                name=personality.display_name,
                avatar_url=personality.avatar_url,
                webhook=self.webhook_sender,
                plain=self.plain_sender,
                view=regenerate_view(prepared) if reply.ok else None,
            )
            if reply.ok:
                await self.chat.record_reply(
                    reply, sent_parts(sent, reply.text, name=personality.display_name)
                )
                self.tasks.spawn(
                    self.after_reply(message.channel.id, prepared.conversation_id),
                    name=f"after-reply-{message.id}",
                )
        except Exception:
            log.exception("Answering message %s as %s failed", message.id, route.personality.name)
            # A personality deleted by another process may still be in the routing cache.
            self.chat.routing.invalidate()
            if not sent:  # a reply the user already reads needs no apology
                await send_notice(message.channel, FAILURE_NOTICE)


async def setup(bot: PersonaeBot) -> None:
    runtime = bot.runtime
    await bot.add_cog(
        ChatCog(
            bot,
            runtime.chat,
            settings=runtime.settings,
            tasks=bot.background,
            sessionmaker=runtime.sessionmaker,
        )
    )
