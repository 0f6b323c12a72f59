"""Buttons and modals: a confirmation for destructive commands, the summarizer-prompt editor."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import discord

from memory.errors import UserFacingError
from memory.owners.personality_fields import MAX_SUMMARIZER_PROMPT_LENGTH

log = logging.getLogger(__name__)

CONFIRM_TIMEOUT = 120.0
ConfirmAction = Callable[[], Awaitable[str]]


async def reply_privately(interaction: discord.Interaction[Any], message: str) -> None:
    """An ephemeral message as the first response or a follow-up, whichever is still open."""
    if interaction.response.is_done():
        await interaction.followup.send(message, ephemeral=True)
    else:
        await interaction.response.send_message(message, ephemeral=True)


async def report_error(interaction: discord.Interaction[Any], error: Exception, where: str) -> None:
    if isinstance(error, UserFacingError):
        await reply_privately(interaction, str(error))
        return
    log.exception("%s failed", where, exc_info=error)
    await reply_privately(interaction, "Something went wrong on our side; it has been logged.")


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


class SummarizerPromptModal(discord.ui.Modal, title="Summarizer prompt"):
    """Edit a personality's summarizer prompt; submitting it empty goes back to the default."""

    prompt: discord.ui.TextInput[SummarizerPromptModal] = discord.ui.TextInput(
        label="Prompt (empty = default)",
        style=discord.TextStyle.paragraph,
        required=False,
        max_length=MAX_SUMMARIZER_PROMPT_LENGTH,
        custom_id="personae:summarizer-prompt",
    )

    def __init__(self, *, current: str | None, save: Callable[[str], Awaitable[str]]) -> None:
        super().__init__(custom_id="personae:summarizer-prompt-modal")
        self.prompt.default = current
        self._save = save

    async def on_submit(self, interaction: discord.Interaction[Any]) -> None:
        await interaction.response.send_message(await self._save(self.prompt.value), ephemeral=True)

    # discord.py's Modal reports errors without the item, narrowing BaseView's signature.
    async def on_error(self, interaction: discord.Interaction[Any], error: Exception) -> None:  # type: ignore[override]
        await report_error(interaction, error, "Summarizer prompt")
