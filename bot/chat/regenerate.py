"""The 🔄 on a personality's latest reply: a `DynamicItem` (it survives restarts) whose press the chat
cog answers with `answer_again`, one chat turn delivered in place of the old reply (`InPlaceDelivery`);
refusals are private to the presser."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import discord

from bot.chat.senders import ReplySender, ReplySenders, sent_parts
from bot.reactions import RememberedReaction
from bot.reply_buttons import add_receipt
from memory.chat.service import ChatReply, ChatService, NotLatestReplyError, PreparedReply, ReplyDelivery
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

TEMPLATE = r"personae:regen:(?P<conversation>[0-9]+):(?P<message>[0-9]+)"
FAILED = "Sorry, I couldn't regenerate that reply just now; the problem has been logged."
# The event a press dispatches (listeners are `on_` + this), answered by whoever answers replies.
REGENERATE_EVENT = "regenerate_pressed"


class RegenerateButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=re.compile(TEMPLATE)):
    """🔄 on the latest reply: answer the message (conversation, message id) again."""

    def __init__(self, conversation_id: int, message_id: str) -> None:
        self.conversation_id = conversation_id
        self.message_id = message_id
        super().__init__(
            discord.ui.Button(
                style=discord.ButtonStyle.secondary,
                emoji="🔄",
                custom_id=f"personae:regen:{conversation_id}:{message_id}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> RegenerateButton:
        return cls(int(match["conversation"]), match["message"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        interaction.client.dispatch(REGENERATE_EVENT, interaction, self.conversation_id, self.message_id)


def regenerate_view(prepared: PreparedReply) -> discord.ui.View:
    """The view that carries the 🔄 button of the reply to this prepared message, and its 🧠."""
    view = discord.ui.View(timeout=None)
    if prepared.request.message_id.isdigit():  # a Discord message: its id fits the button
        view.add_item(RegenerateButton(prepared.conversation_id, prepared.request.message_id))
    add_receipt(view, prepared.conversation_id, prepared.request.message_id, prepared.memories_seen)
    return view


class InPlaceDelivery(ReplyDelivery):
    """The new answer where the old reply is; the presser's "thinking…" goes once it is in place, or
    says why the old answer stays."""

    def __init__(
        self, interaction: discord.Interaction[Any], sender: ReplySender, reaction: RememberedReaction
    ) -> None:
        self._interaction = interaction
        self._sender = sender
        self._reaction = reaction

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        if not reply.ok:  # the model failed: the old answer stays, and the notice says why
            await self._interaction.edit_original_response(content=reply.text)
            return []
        personality = reply.prepared.personality
        sent = await self._sender.replace(
            self._interaction.channel,  # type: ignore[arg-type]  # a component's channel takes messages
            [int(i) for i in reply.prepared.request.replaces],
            reply.text,
            name=personality.display_name,
            avatar_url=personality.avatar_url,
            view=regenerate_view(reply.prepared),
        )
        await self._interaction.delete_original_response()
        return sent_parts(sent, reply.text, name=personality.display_name)

    async def remembered(self, message_ids: Sequence[str]) -> None:
        channel_id = str(self._interaction.channel_id or "")
        await self._reaction.add((channel_id, i) for i in message_ids)


async def answer_again(
    interaction: discord.Interaction[Any],
    conversation_id: int,
    message_id: str,
    *,
    chat: ChatService,
    senders: ReplySenders,
    reaction: RememberedReaction,
) -> None:
    """The press of a 🔄: answered again in place when allowed; refusals are private."""
    try:
        request = await chat.request_again(
            conversation_id=conversation_id, message_id=message_id, user_id=str(interaction.user.id)
        )
    except NotLatestReplyError as error:
        # An older reply's button goes once pressed, and the presser reads why.
        await interaction.response.edit_message(view=None)
        await interaction.followup.send(str(error), ephemeral=True)
        return
    except UserFacingError as error:
        await interaction.response.send_message(str(error), ephemeral=True)
        return
    await interaction.response.defer(ephemeral=True, thinking=True)  # the model takes a while
    clicked = interaction.message
    sender = senders.that_sent(clicked) if clicked is not None else senders.plain
    try:
        await chat.answer(request, InPlaceDelivery(interaction, sender, reaction))
    except Exception as error:
        if isinstance(error, UserFacingError):  # a newer reply came in while the model wrote, say
            text = str(error)
        else:
            log.exception(
                "Regenerating the reply to %s in conversation %s failed", message_id, conversation_id
            )
            text = FAILED
        try:
            await interaction.edit_original_response(content=text)
        except discord.HTTPException as exc:  # the "thinking…" is gone once the answer was put in place
            log.warning("Could not tell the presser of a 🔄 why it failed: %s", exc)
