"""/memory: each user sees and steers their own memories, never anyone else's."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.events import RECEIPT_EVENT
from bot.interactions import Interaction, user_id_of, venue_of
from bot.memory import texts
from bot.memory.browse import BrowseCommands, SearchQuery
from bot.memory.incognito import IncognitoCommands
from bot.memory.receipt import show_receipt
from bot.memory.status import StatusCommands, confirm_forget, id_of
from bot.reply_buttons import ReceiptButton
from bot.slash_commands import command
from bot.whole_memory import memory_message
from memory.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from bot.client import PersonaeBot

SEARCH_LIMIT = 5


class MemoryCog(
    BrowseCommands,
    IncognitoCommands,
    StatusCommands,
    commands.GroupCog,
    group_name="memory",
    group_description="Your long-term memories",
):
    """Thin commands over MemoryService, UserSettingsService, IncognitoService and ChatService; every
    reply is private. Its parts, in the order they are published: status, settings and fresh
    (status.py), incognito (incognito.py), browse (browse.py), then search,
    forget, show, export and reset (here)."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        super().__init__()

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(ReceiptButton)  # the receipts of replies sent before a restart too

    async def cog_unload(self) -> None:
        self.bot.remove_dynamic_items(ReceiptButton)

    @commands.Cog.listener(f"on_{RECEIPT_EVENT}")
    async def receipt(self, interaction: Interaction, conversation_id: int, message_id: str) -> None:
        """A 🧠 pressed: the memories that reply used, to the user it answered."""
        await show_receipt(interaction, conversation_id, message_id, memory=self.runtime.memory)

    @command(
        "search",
        "Search your memories",
        query="What to look for",
        personality="Only this personality's memories",
    )
    async def search(
        self, interaction: Interaction, query: SearchQuery, personality: str | None = None
    ) -> None:
        # Embedding the query can take a moment.
        await interaction.response.defer(ephemeral=True, thinking=True)
        p = await self._personality(personality)
        # The user's own search covers every venue; the reply is private.
        uid = user_id_of(interaction)
        memory = self.runtime.memory
        found = await memory.search(user_id=uid, query=query, personality_id=id_of(p), limit=SEARCH_LIMIT)
        short = await memory.short_ids(user_id=uid, ids=[m.id for m in found])
        await interaction.followup.send(texts.search_results(query, found, short), ephemeral=True)

    @command(
        "forget",
        "Delete one of your memories, or all of them",
        memory="A memory id from /memory search (its first characters will do), or 'all'",
        personality="Only this personality's memories (with 'all')",
    )
    async def forget(
        self, interaction: Interaction, memory: app_commands.Range[str, 1, 64], personality: str | None = None
    ) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        if memory.strip().lower() != "all":
            await interaction.response.defer(ephemeral=True, thinking=True)
            ids = [await self.runtime.memory.memory_id(user_id=uid, text=memory)]
            if not await self.runtime.memory.forget(user_id=uid, personality_id=id_of(p), memory_ids=ids):
                raise NotFoundError(f"You have no memory with id {ids[0]} {texts.scope_of(p)}.")
            await interaction.followup.send("Forgotten. It will not come back in recall.", ephemeral=True)
            return
        existing = (await self.runtime.memory.stats(personality_id=id_of(p), user_id=uid)).memories
        scope = texts.scope_of(p)
        if not existing:
            await interaction.response.send_message(f"You have no memories {scope}.", ephemeral=True)
            return
        await interaction.response.send_message(
            f"Delete all {existing} of your memories {scope}? This cannot be undone.",
            view=confirm_forget(
                self.runtime.memory, interaction, p, f"Deleted {{count}} memories {scope}.", "Delete"
            ),
            ephemeral=True,
        )

    @command(
        "show",
        "One of your memories, whole: how it was made, what it keeps, where it came from",
        memory="A memory id from /memory search or browse (its first characters will do)",
    )
    async def show(self, interaction: Interaction, memory: app_commands.Range[str, 1, 64]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        uid = user_id_of(interaction)
        memory_id = await self.runtime.memory.memory_id(user_id=uid, text=memory)
        whole = await self.runtime.memory.whole(user_id=uid, memory_id=memory_id)
        await interaction.followup.send(memory_message(whole), ephemeral=True)

    @command(
        "export", "Download your memories as a JSONL file", personality="Only this personality's memories"
    )
    async def export(self, interaction: Interaction, personality: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        p = await self._personality(personality)
        lines = await self.runtime.transfer.export_lines(
            user_id=user_id_of(interaction), personality_id=id_of(p)
        )
        if not lines:
            await interaction.followup.send("You have no memories to export.", ephemeral=True)
            return
        file = discord.File(io.BytesIO(("\n".join(lines) + "\n").encode()), filename=texts.export_filename(p))
        await interaction.followup.send(texts.EXPORT_NOTE, file=file, ephemeral=True)

    @command(
        "reset",
        "Clear the conversation summary here, and what you said that is not yet a memory",
        personality="The personality whose conversation here to reset",
    )
    async def reset(self, interaction: Interaction, personality: str | None = None) -> None:
        venue = venue_of(interaction)
        p = await self._personality(personality)
        if p is None:
            bindings = self.runtime.bindings
            bound = await bindings.bound_personalities([venue.channel_id]) if venue.channel_id else []
            if len(bound) != 1:
                raise InvalidInputError("Name the personality whose conversation here should be reset.")
            p = bound[0]
        # A pass forming this conversation's memories finishes first (memory.formation.reset).
        await interaction.response.defer(ephemeral=True, thinking=True)
        removed = await self.runtime.chat.reset_conversation(
            personality_id=p.id, guild_id=venue.guild_id, channel_id=venue.channel_id, user_id=venue.user_id
        )
        await interaction.followup.send(texts.conversation_reset(p, removed), ephemeral=True)
