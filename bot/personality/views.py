"""The summarizer-prompt editor of /personality summarizer-prompt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

from bot.interactions import report_error
from memory.owners.personality_fields import MAX_SUMMARIZER_PROMPT_LENGTH


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
