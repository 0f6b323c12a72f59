"""The chat cog: Discord's messages, reconnections and 🔄 presses turned into calls on its helpers.

Thin on purpose: the turn (storing, prompts, the model, memory) is memory.chat.ChatService's; answering a
Discord message with it is `answering`, the flood control `flood`, the catching up (pending memories,
missed messages) `catch_up`, the 🔄 of the latest reply `regenerate`. Each answer runs as one of the
bot's background tasks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from bot.chat.answering import FAILURE_NOTICE, MessageAnswerer
from bot.chat.catch_up import MissedMessages, PendingMemories
from bot.chat.flood import FloodControl, flood_notice
from bot.chat.greeting import ChannelGreeter
from bot.chat.regenerate import REGENERATE_EVENT, RegenerateButton, answer_again
from bot.chat.senders import ReplySenders, send_notice
from bot.events import GREETING_EVENT
from bot.reactions import RememberedReaction
from bot.slash_commands import PersonaeCog
from memory.chat.service import Route

if TYPE_CHECKING:
    from bot.client import PersonaeBot

log = logging.getLogger(__name__)


class ChatCog(PersonaeCog):
    """Answers messages that address a personality, and those it missed while offline."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        runtime = self.runtime
        settings = runtime.settings
        self.chat = runtime.chat
        self.tasks = tasks = bot.background
        self.flood = FloodControl(settings.cooldown_messages, settings.cooldown_seconds)
        self.reaction = RememberedReaction(bot, settings.remembered_reaction)
        self.senders = ReplySenders.for_bot(bot.user)
        self.greeter = ChannelGreeter(runtime.greetings, self.senders)
        self.answerer = MessageAnswerer(bot, runtime.chat, self.senders, self.reaction, self.greeter)
        self.pending = PendingMemories(
            runtime.memory, runtime.chat, self.reaction, tasks, interval=settings.catch_up_seconds
        )
        self.missed = MissedMessages(
            bot,
            runtime.chat,
            self.answerer,
            tasks,
            reply_minutes=settings.missed_reply_minutes,
        )

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(RegenerateButton)  # the buttons of replies sent before a restart too
        self.pending.start()

    async def cog_unload(self) -> None:
        self.bot.remove_dynamic_items(RegenerateButton)
        self.pending.stop()

    @commands.Cog.listener("on_ready")
    @commands.Cog.listener("on_resumed")
    async def read_missed(self) -> None:
        """On every (re)connect: read back what was said while the bot was away (see catch_up)."""
        self.missed.read_soon()

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        try:
            route = await self.answerer.route(message)
        except Exception:
            log.exception("Routing message %s failed", message.id)
            await send_notice(message.channel, FAILURE_NOTICE)
            return
        if route is None:
            return
        refusal = self.flood.hit(message)
        if refusal is not None:
            await self.store_refused(message, route)
            if refusal.notify:
                await send_notice(
                    message.channel, flood_notice(message.author.display_name, refusal.retry_after)
                )
            return
        self.tasks.spawn(self.answerer.answer(message, route), name=f"answer-{message.id}")

    async def store_refused(self, message: discord.Message, route: Route) -> None:
        """Stored before the notice, as refused: a catch-up after a restart or a resume passes it over
        instead of answering it late, and it never becomes a memory (memory.chat.refused)."""
        try:
            await self.chat.refuse(self.answerer.request_of(message, route))
        except Exception:  # the notice goes out all the same; the next catch-up may read it back
            log.exception("Storing refused message %s failed", message.id)

    @commands.Cog.listener(f"on_{GREETING_EVENT}")
    async def greet(
        self, channel: discord.abc.Messageable, guild_id: str | None, personality_id: int, user: discord.User
    ) -> None:
        """A personality activated in a channel: its greeting, if the conversation there is new."""
        await self.greeter.greet(channel, guild_id, personality_id, user)

    @commands.Cog.listener(f"on_{REGENERATE_EVENT}")
    async def regenerate(
        self, interaction: discord.Interaction[Any], conversation_id: int, message_id: str
    ) -> None:
        """A 🔄 pressed: answer that message again, in place of its reply."""
        await answer_again(
            interaction,
            conversation_id,
            message_id,
            chat=self.chat,
            senders=self.senders,
            reaction=self.reaction,
        )
