"""The 🧠 on a reply that used long-term memories: its receipt. Its button (bot.reply_buttons) is on the
reply the chat sent; a press shows the user who was answered, privately, the memories recorded with
that reply (what the model saw, not a new search), each with its date and why it was chosen, to pin,
correct (Wrong…) or forget as /memory browse does. Anyone else is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord

from bot.interactions import reply_privately, report_error, user_id_of
from bot.memory.browse_view import BrowseListing, BrowseView

if TYPE_CHECKING:
    from memory.service import MemoryService, ReplyReceipt

WHY = {"pinned": "pinned, about your message", "rank": "match #{rank}", "context": "said around #{rank}"}


def why_chosen(reason: str, rank: int) -> str:
    """Why a memory went into a reply, in a few words (its receipt's reason and rank)."""
    return WHY[reason].format(rank=rank)


def receipt_listing(memory: MemoryService, user_id: str, receipt: ReplyReceipt) -> BrowseListing:
    """The receipt's memories as a browse listing: in the prompt's order, each with why it was chosen."""
    return BrowseListing(
        memory,
        user_id,
        None,
        "in this reply",
        [m.id for m in receipt.memories],
        notes={m.id: why_chosen(m.reason, m.rank) for m in receipt.memories},
    )


def forgotten_since(count: int) -> str:
    """The note on memories a reply used that were forgotten since (left out of its receipt)."""
    if count == 1:
        return "1 memory this reply used has been forgotten since."
    return f"{count} memories this reply used have been forgotten since." if count else ""


async def show_receipt(
    interaction: discord.Interaction[Any], conversation_id: int, message_id: str, *, memory: MemoryService
) -> None:
    """The press of a 🧠: the reply's memories to the user it answered; anyone else is refused."""
    # Two reads of PostgreSQL: acknowledge first, privately.
    await interaction.response.defer(ephemeral=True, thinking=True)
    uid = user_id_of(interaction)
    try:
        receipt = await memory.reply_receipt(
            user_id=uid, message_id=message_id, conversation_id=conversation_id
        )
        view = BrowseView(
            receipt_listing(memory, uid, receipt), owner_id=interaction.user.id, edit_label="Wrong…"
        )
        view.notice = forgotten_since(receipt.forgotten)
        await view.load()
    except Exception as error:  # a refusal (not the user answered) is theirs to read
        await report_error(interaction, error, "Memory receipt")
        return
    if not view.memories:
        await reply_privately(interaction, view.notice or "This reply used no long-term memories.")
        return
    await interaction.followup.send(view.content(), view=view, ephemeral=True)
