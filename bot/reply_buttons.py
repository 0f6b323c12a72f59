"""The 🧠 on a reply that used long-term memories, as the chat puts it on the reply: a `DynamicItem` (it
survives restarts) whose custom id names the conversation and the message the reply answers. A press
dispatches RECEIPT_EVENT, which the memory cog answers (bot.memory.receipt); here, at the bot's level,
so that the chat that sends replies and the memory feature that shows receipts import neither other."""

from __future__ import annotations

import re
from typing import Any

import discord

from bot.events import RECEIPT_EVENT

TEMPLATE = r"personae:receipt:(?P<conversation>[0-9]+):(?P<message>[0-9]+)"


class ReceiptButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=re.compile(TEMPLATE)):
    """🧠 N beside 🔄: the memories of the reply to the message (conversation, message id)."""

    def __init__(self, conversation_id: int, message_id: str, count: int = 0) -> None:
        self.conversation_id = conversation_id
        self.message_id = message_id
        super().__init__(
            discord.ui.Button(
                style=discord.ButtonStyle.secondary,
                emoji="🧠",
                label=str(count) if count else None,
                custom_id=f"personae:receipt:{conversation_id}:{message_id}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ReceiptButton:
        return cls(int(match["conversation"]), match["message"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        interaction.client.dispatch(RECEIPT_EVENT, interaction, self.conversation_id, self.message_id)


def add_receipt(view: discord.ui.View, conversation_id: int, message_id: str, count: int) -> None:
    """Put the 🧠 of a reply that used `count` memories on its view; none used, no button."""
    if count and message_id.isdigit():  # a Discord message: its id fits the button
        view.add_item(ReceiptButton(conversation_id, message_id, count))
