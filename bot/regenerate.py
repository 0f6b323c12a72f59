"""The 🔄 button on a personality's reply: the model answers the same message again, in place.

The button is a DynamicItem: its custom id names the conversation and the message answered, so it works
after a restart without any view kept in memory. Pressing it: memory.chat.regenerate checks that this
user was the one answered (others are refused privately) and that the reply is still the
conversation's latest (an older reply's button is taken off, and the presser told why); then the bot
thinks (privately, for the presser), answers again, and the new answer replaces the old one where it
is (the webhook's message edited, or the bot's own in a DM; all of its parts when it was split). Then
the exchange is remembered anew from the answer that stays, as after any reply.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import discord

from bot.senders import sent_parts
from memory.chat.regenerate import NotLatestReplyError
from memory.chat.turns import ChatReply, PreparedReply
from memory.errors import UserFacingError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bot.cogs.chat import ChatCog

log = logging.getLogger(__name__)

TEMPLATE = r"personae:regen:(?P<conversation>[0-9]+):(?P<message>[0-9]+)"
FAILED = "Sorry, I couldn't regenerate that reply just now; the problem has been logged."


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
        cog = interaction.client.get_cog("ChatCog")
        if cog is None:  # the chat extension is not loaded: nothing can answer
            await interaction.response.send_message(FAILED, ephemeral=True)
            return
        await regenerate(cog, interaction, self.conversation_id, self.message_id)


def regenerate_view(prepared: PreparedReply) -> discord.ui.View:
    """The view that carries the 🔄 button of the reply to this prepared message."""
    view = discord.ui.View(timeout=None)
    if prepared.request.message_id.isdigit():  # a Discord message: its id fits the button
        view.add_item(RegenerateButton(prepared.conversation_id, prepared.request.message_id))
    return view


async def regenerate(
    cog: ChatCog, interaction: discord.Interaction[Any], conversation_id: int, message_id: str
) -> None:
    """Answer the message again for the user who pressed, replacing its reply; refusals are private."""
    regenerator = cog.chat.regenerate
    user_id = str(interaction.user.id)
    try:
        await regenerator.check(conversation_id=conversation_id, message_id=message_id, user_id=user_id)
    except NotLatestReplyError as error:
        # An older reply's button goes once pressed, and the presser reads why.
        await interaction.response.edit_message(view=None)
        await interaction.followup.send(str(error), ephemeral=True)
        return
    except UserFacingError as error:
        await interaction.response.send_message(str(error), ephemeral=True)
        return
    await interaction.response.defer(ephemeral=True, thinking=True)  # the model takes a while

    async def put_in_place(reply: ChatReply, old_ids: Sequence[str]) -> list[tuple[str, str]]:
        personality = reply.prepared.personality
        clicked = interaction.message
        sender = cog.webhook_sender if clicked is not None and clicked.webhook_id else cog.plain_sender
        sent = await sender.replace(
            interaction.channel,  # type: ignore[arg-type]  # a component's channel takes messages
            [int(i) for i in old_ids],
            reply.text,
            name=personality.display_name,
            avatar_url=personality.avatar_url,
            view=regenerate_view(reply.prepared),
        )
        return sent_parts(sent, reply.text, name=personality.display_name)

    try:
        reply = await regenerator.regenerate(
            conversation_id=conversation_id, message_id=message_id, user_id=user_id, put_in_place=put_in_place
        )
    except UserFacingError as error:  # a newer reply came in while the model wrote, say
        await interaction.edit_original_response(content=str(error))
        return
    except Exception:
        log.exception("Regenerating the reply to %s in conversation %s failed", message_id, conversation_id)
        await interaction.edit_original_response(content=FAILED)
        return
    if not reply.ok:  # the model failed: the old answer stays, and the notice says why
        await interaction.edit_original_response(content=reply.text)
        return
    await interaction.delete_original_response()
    cog.tasks.spawn(
        cog.after_reply(interaction.channel_id or 0, conversation_id),
        name=f"after-regenerate-{conversation_id}-{message_id}",
    )
