"""The confirmation a destructive command asks for (/memory forget all, /personality delete)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

from bot.interactions import report_error

CONFIRM_TIMEOUT = 120.0
ConfirmAction = Callable[[], Awaitable[str]]


class ConfirmView(discord.ui.View):
    """Confirm or cancel a destructive action; only the user who asked can press the buttons."""

    def __init__(self, *, user_id: int, action: ConfirmAction, confirm_label: str = "Delete") -> None:
        super().__init__(timeout=CONFIRM_TIMEOUT)
        self.user_id = user_id
        self.action = action
        self.confirm.label = confirm_label
        self.result: str | None = None

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        if interaction.user.id != self.user_id:
            await interaction.response.send_message("This confirmation is not yours.", ephemeral=True)
            return False
        return True

    @discord.ui.button(label="Delete", style=discord.ButtonStyle.danger, custom_id="personae:confirm")
    async def confirm(self, interaction: discord.Interaction[Any], button: discord.ui.Button[Any]) -> None:
        self.stop()
        # Deleting from the index can take a moment: acknowledge the press first.
        await interaction.response.defer()
        self.result = await self.action()
        await interaction.edit_original_response(content=self.result, view=None)

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary, custom_id="personae:cancel")
    async def cancel(self, interaction: discord.Interaction[Any], button: discord.ui.Button[Any]) -> None:
        self.stop()
        self.result = "Cancelled; nothing was changed."
        await interaction.response.edit_message(content=self.result, view=None)

    async def on_error(
        self, interaction: discord.Interaction[Any], error: Exception, item: discord.ui.Item[Any]
    ) -> None:
        await report_error(interaction, error, "Confirmation")
