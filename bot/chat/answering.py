"""A Discord message answered as the personality it addresses: routed (bots, webhooks and the bot itself
never are), then one chat turn whose reply goes into the message's channel (`ChannelDelivery`); a
failure is a short notice. Used for live messages and for those caught up."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import discord

from bot.chat.greeting import ChannelGreeter
from bot.chat.regenerate import regenerate_view
from bot.chat.senders import ReplySenders, send_notice, sent_parts, typing_if_possible
from bot.reactions import RememberedReaction
from memory.chat.service import ChatReply, ChatRequest, ChatService, ReplyDelivery, Route

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, I couldn't answer that just now; the problem has been logged."


def channel_ids_of(channel: Any) -> list[str]:
    """The channel and, for a thread, its parent: a thread inherits its parent's bindings."""
    ids = [str(channel.id)]
    parent_id = getattr(channel, "parent_id", None)
    if isinstance(channel, discord.Thread) and parent_id is not None:
        ids.append(str(parent_id))
    return ids


class ChannelDelivery(ReplyDelivery):
    """A reply into the channel of the message it answers, under the personality's name and avatar."""

    def __init__(
        self, channel: discord.abc.Messageable, senders: ReplySenders, reaction: RememberedReaction
    ) -> None:
        self._channel = channel
        self._senders = senders
        self._reaction = reaction
        self.sent: list[discord.Message] = []

    def writing(self) -> AbstractAsyncContextManager[None]:
        return typing_if_possible(self._channel)

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        personality = reply.prepared.personality
        self.sent = await self._senders.send_as(
            self._channel,
            reply.text,
            name=personality.display_name,
            avatar_url=personality.avatar_url,
            view=regenerate_view(reply.prepared) if reply.ok else None,
        )
        return sent_parts(self.sent, reply.text, name=personality.display_name) if reply.ok else []

    async def remembered(self, message_ids: Sequence[str]) -> None:
        channel_id = str(getattr(self._channel, "id", ""))
        await self._reaction.add((channel_id, i) for i in message_ids)


class MessageAnswerer:
    """Routes Discord messages and answers those that address a personality."""

    def __init__(
        self,
        client: discord.Client,
        chat: ChatService,
        senders: ReplySenders,
        reaction: RememberedReaction,
        greeter: ChannelGreeter,
    ) -> None:
        self._client = client
        self._chat = chat
        self.senders = senders
        self.reaction = reaction
        self.greeter = greeter

    def is_ignored(self, message: discord.Message) -> bool:
        """Other bots, webhooks (ours included) and the bot itself never get an answer: no loops."""
        if message.author.bot or message.webhook_id is not None:
            return True
        me = self._client.user
        return me is not None and message.author.id == me.id

    async def route(self, message: discord.Message) -> Route | None:
        """The personality this message addresses, if any (ignored messages address nobody)."""
        if self.is_ignored(message) or not message.content.strip():
            return None
        reference = message.reference
        return await self._chat.route(
            message.content,
            channel_ids=channel_ids_of(message.channel),
            reply_to_message_id=str(reference.message_id) if reference and reference.message_id else None,
        )

    @staticmethod
    def request_of(message: discord.Message, route: Route) -> ChatRequest:
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
        """Answer the message as the personality (one chat turn); a failure is a notice, not silence."""
        delivery = ChannelDelivery(message.channel, self.senders, self.reaction)
        try:
            if message.guild is None:  # a first DM opens with the character's greeting
                await self.greeter.greet(message.channel, None, route.personality.id, message.author)
            await self._chat.answer(self.request_of(message, route), delivery)
        except Exception:
            log.exception("Answering message %s as %s failed", message.id, route.personality.name)
            # A personality deleted by another process may still be in the routing cache.
            self._chat.invalidate_routing()
            if not delivery.sent:  # a reply the user already reads needs no apology
                await send_notice(message.channel, FAILURE_NOTICE)
