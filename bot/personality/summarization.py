"""How a personality forms its memories: summarization on or off, the summarizer's model and prompt, and
re-summarizing what is already stored, with progress in the reply."""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.personality import texts
from bot.personality.views import SummarizerPromptModal
from bot.slash_commands import PersonaeCog, command
from memory.errors import UserFacingError

log = logging.getLogger(__name__)


class SummarizationCommands(PersonaeCog):
    """/personality memory, summarizer-model, summarizer-prompt and resummarize (a part of PersonalityCog)."""

    @command(
        "memory",
        "Choose how a personality stores new memories",
        personality="The personality to change",
        summarization="enabled: store condensed memories; disabled: store them word for word",
        mode="With summarization: summarized (condensed only) or hybrid (condensed plus the original)",
    )
    async def memory(
        self,
        interaction: Interaction,
        personality: str,
        summarization: Literal["enabled", "disabled"],
        mode: Literal["summarized", "hybrid"] | None = None,
    ) -> None:
        p, previous = await self.runtime.personalities.set_summarization(
            personality, actor=user_id_of(interaction), enabled=summarization == "enabled", mode=mode
        )
        await interaction.response.send_message(texts.summarization_changed(p, previous), ephemeral=True)

    @command(
        "summarizer-model",
        "Choose the model that summarizes memories",
        personality="The personality to change",
        model="An LLM config name, an allowed model string (e.g. openai/gpt-4o-mini), or 'default'",
    )
    async def summarizer_model(
        self,
        interaction: Interaction,
        personality: str,
        model: app_commands.Range[str, 1, 200],
    ) -> None:
        p = await self.runtime.personalities.set_summarizer_model(
            personality, actor=user_id_of(interaction), model=model
        )
        chosen = texts.describe_model(p.summarizer_llm_config, p.summarizer_model, "the bot's default")
        await interaction.response.send_message(
            f"**{p.display_name}** now summarizes memories with {chosen}.", ephemeral=True
        )

    @command(
        "summarizer-prompt",
        "Edit the prompt that summarizes memories",
        personality="The personality whose summarizer prompt to edit",
    )
    async def summarizer_prompt(self, interaction: Interaction, personality: str) -> None:
        service = self.runtime.personalities
        p = await self._managed_personality(interaction, personality)

        async def save(text: str) -> str:
            saved = await service.set_summarizer_prompt(p.name, actor=user_id_of(interaction), prompt=text)
            if saved.summarizer_prompt is None:
                return f"**{saved.display_name}** uses the default summarizer prompt again."
            return f"Saved **{saved.display_name}**'s summarizer prompt ({len(text.strip())} characters)."

        await interaction.response.send_modal(
            SummarizerPromptModal(current=await service.summarizer_prompt(p.name), save=save)
        )

    @command(
        "resummarize",
        "Re-summarize existing memories in the background",
        personality="The personality whose memories to re-summarize",
    )
    async def resummarize(self, interaction: Interaction, personality: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        p = await self._managed_personality(interaction, personality)
        memory = self.runtime.memory
        stats = await memory.stats(personality_id=p.id)
        total = sum(r.memories for r in stats.rows if r.summarizer in ("verbatim", "extractive"))
        await interaction.edit_original_response(content=texts.resummarize_progress(p, 0, total))
        background = self.bot.background
        done = 0
        edits: list[asyncio.Task[object]] = []

        def step(count: int) -> None:
            nonlocal done
            done += count
            edit = interaction.edit_original_response(content=texts.resummarize_progress(p, done, total))
            edits.append(background.spawn(edit, name=f"personae-resummarize-progress-{p.name}"))

        async def run() -> None:
            try:
                text = texts.resummarize_report(p, await memory.resummarize(p.id, progress=step))
            except UserFacingError as exc:
                text = str(exc)
            except Exception:
                log.exception("Re-summarizing %s failed", p.name)
                text = "Re-summarizing failed on our side; it has been logged. Run it again to resume."
            # The last word is the result, not a late progress edit (their failures are logged).
            await asyncio.gather(*edits, return_exceptions=True)
            await interaction.edit_original_response(content=text)

        background.spawn(run(), name=f"personae-resummarize-{p.name}")
