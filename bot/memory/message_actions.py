""" "Remember this" and "Forget this": message context-menu commands (right-click a message, Apps).

On a user's message or on a personality's reply, they steer the memory of that exchange: remember it
now, pinned, or forget it for good. Only the user whose exchange it is may; the services check it.
discord.py keeps context menus out of cogs' command collection, so this cog adds its own to the tree
when it loads and takes them out when it unloads; `personae sync-commands` publishes them with the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.reactions import RememberedReaction
from bot.slash_commands import PersonaeCog

if TYPE_CHECKING:
    from bot.client import PersonaeBot


class MessageActions(PersonaeCog):
    """Thin context menus over MemoryService.remember_message and forget_message; replies are private."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        self.menus = (
            app_commands.ContextMenu(name="Remember this", callback=self.remember_this),
            app_commands.ContextMenu(name="Forget this", callback=self.forget_this),
        )

    async def cog_load(self) -> None:
        for menu in self.menus:
            self.bot.tree.add_command(menu)

    async def cog_unload(self) -> None:
        for menu in self.menus:
            self.bot.tree.remove_command(menu.name, type=menu.type)

    async def remember_this(self, interaction: Interaction, message: discord.Message) -> None:
        # Forming the exchange may take a summarizer call.
        await interaction.response.defer(ephemeral=True, thinking=True)
        runtime = self.runtime
        report = await runtime.memory.remember_message(
            message_id=str(message.id), channel_id=str(message.channel.id), user_id=user_id_of(interaction)
        )
        # The 📝 of what formation just remembered, as after a reply (none while incognito: none formed).
        channel = str(message.channel.id)
        reaction = RememberedReaction(self.bot, runtime.settings.remembered_reaction)
        await reaction.add((channel, i) for i in report.remembered_message_ids)
        await interaction.followup.send(
            "Remembered and pinned: it will be recalled ahead of other memories when it matters. "
            "See it with `/memory browse`.",
            ephemeral=True,
        )

    async def forget_this(self, interaction: Interaction, message: discord.Message) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        forgotten = await self.runtime.memory.forget_message(
            message_id=str(message.id), channel_id=str(message.channel.id), user_id=user_id_of(interaction)
        )
        done = (
            f"Forgot {forgotten} {'memory' if forgotten == 1 else 'memories'} of this exchange"
            if forgotten
            else ("This exchange had no memory yet")
        )
        await interaction.followup.send(f"{done}; it will never be remembered again.", ephemeral=True)
