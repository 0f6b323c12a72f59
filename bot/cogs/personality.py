"""/personality: create, inspect and steer personalities. Permission rules live in the services."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from bot.views import ConfirmView, SummarizerPromptModal, reply_privately
from memory.errors import UserFacingError
from memory.types import MemoryMode

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.runtime import Runtime
    from models import Personality

log = logging.getLogger(__name__)

PROMPT_PREVIEW_CHARS = 300
LIST_LIMIT = 50


async def personality_autocomplete(
    interaction: discord.Interaction[PersonaeBot], current: str
) -> list[app_commands.Choice[str]]:
    """Personalities whose name starts with what has been typed (at most 25)."""
    rows = await interaction.client.runtime.personalities.names_matching(current)
    return [app_commands.Choice(name=f"{display} ({name})"[:100], value=name) for name, display in rows]


async def model_autocomplete(
    interaction: discord.Interaction[PersonaeBot], current: str
) -> list[app_commands.Choice[str]]:
    """LLM config names and allow-listed model prefixes that start with what has been typed."""
    runtime = interaction.client.runtime
    names = [c.name for c in await runtime.llm_configs.list()] if runtime.llm_configs else []
    options = ["default", *names, *runtime.personalities.model_allow_list]
    return [app_commands.Choice(name=o, value=o) for o in options if o.startswith(current.strip())][:25]


def user_id_of(interaction: discord.Interaction[PersonaeBot]) -> str:
    return str(interaction.user.id)


def describe_model(config_name: str | None, model: str | None, fallback: str) -> str:
    if config_name:
        return f"config `{config_name}`"
    return f"`{model}`" if model else fallback


def personality_card(p: Personality, *, show_prompt: bool) -> str:
    summarizer_prompt = "custom" if p.summarizer_prompt_id else "default"
    lines = [
        f"**{p.display_name}** (`{p.name}`)",
        f"Owner: {f'<@{p.owner_id}>' if p.owner_id else 'the operator'}",
        "Chat model: "
        + describe_model(p.chat_llm_config and p.chat_llm_config.name, p.chat_model, "deployment default"),
        f"Memory: {'on' if p.memory_enabled else 'off'}, stored {p.memory_mode}",
        "Summarizer: "
        + describe_model(
            p.summarizer_llm_config and p.summarizer_llm_config.name, p.summarizer_model, "deployment default"
        )
        + f", {summarizer_prompt} prompt",
    ]
    if p.avatar_url:
        lines.append(f"Avatar: <{p.avatar_url}>")
    if show_prompt:
        preview = p.system_prompt[:PROMPT_PREVIEW_CHARS]
        ellipsis = "…" if len(p.system_prompt) > PROMPT_PREVIEW_CHARS else ""
        lines.append(f"Prompt: {preview}{ellipsis}")
    return "\n".join(lines)


class PersonalityCog(commands.GroupCog, group_name="personality", group_description="Manage personalities"):
    """Thin commands over PersonalityService, BindingService and MemoryService."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        self._tasks: set[asyncio.Task[None]] = set()
        super().__init__()

    @property
    def runtime(self) -> Runtime:
        return self.bot.runtime

    async def cog_unload(self) -> None:
        for task in self._tasks:
            task.cancel()

    @app_commands.command(name="create", description="Create a personality that you own")
    @app_commands.describe(
        name="Short unique name used in commands (letters, digits, dashes)",
        display_name="Name shown on its messages",
        prompt="Its system prompt: who it is and how it talks",
        model="An LLM config name or an allowed model string (default: the bot's)",
        avatar="An https:// image URL for its avatar",
    )
    @app_commands.autocomplete(model=model_autocomplete)
    async def create(
        self,
        interaction: discord.Interaction[PersonaeBot],
        name: app_commands.Range[str, 1, 64],
        display_name: app_commands.Range[str, 1, 80],
        prompt: app_commands.Range[str, 1, 4000],
        model: str | None = None,
        avatar: str | None = None,
    ) -> None:
        p = await self.runtime.personalities.create_owned(
            name,
            owner_id=user_id_of(interaction),
            display_name=display_name,
            prompt=prompt,
            model=model,
            avatar_url=avatar,
        )
        await interaction.response.send_message(
            f"Created **{p.display_name}** (`{p.name}`). Talk to it by name, or bind it to a channel "
            "with `/personality activate`.",
            ephemeral=True,
        )

    @app_commands.command(name="edit", description="Change a personality you own")
    @app_commands.describe(
        personality="The personality to change",
        display_name="New name shown on its messages",
        prompt="New system prompt",
        model="An LLM config name, an allowed model string, or 'default'",
        avatar="New https:// avatar image URL ('none' removes it)",
    )
    @app_commands.autocomplete(personality=personality_autocomplete, model=model_autocomplete)
    async def edit(
        self,
        interaction: discord.Interaction[PersonaeBot],
        personality: str,
        display_name: app_commands.Range[str, 1, 80] | None = None,
        prompt: app_commands.Range[str, 1, 4000] | None = None,
        model: str | None = None,
        avatar: str | None = None,
    ) -> None:
        p = await self.runtime.personalities.edit(
            personality,
            actor=user_id_of(interaction),
            display_name=display_name,
            prompt=prompt,
            model=model,
            avatar_url="" if avatar is not None and avatar.strip().lower() == "none" else avatar,
        )
        await interaction.response.send_message(
            f"Updated.\n{personality_card(p, show_prompt=True)}", ephemeral=True
        )

    @app_commands.command(name="info", description="Show a personality's settings")
    @app_commands.describe(personality="The personality to show")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def info(self, interaction: discord.Interaction[PersonaeBot], personality: str) -> None:
        p = await self.runtime.personalities.get_detailed(personality)
        manager = self.runtime.personalities.can_manage(p, user_id_of(interaction))
        await interaction.response.send_message(personality_card(p, show_prompt=manager), ephemeral=True)

    @app_commands.command(name="list", description="List the personalities on this bot")
    @app_commands.describe(mine="Only the personalities you own")
    async def list_(self, interaction: discord.Interaction[PersonaeBot], mine: bool = False) -> None:
        uid = user_id_of(interaction)
        rows = await self.runtime.personalities.list(owner_id=uid if mine else None)
        if not rows:
            text = "No personalities yet. Create one with `/personality create`."
        else:
            lines = [
                f"• **{p.display_name}** (`{p.name}`), memory {p.memory_mode}"
                + (" (yours)" if p.owner_id == uid else "")
                for p in rows[:LIST_LIMIT]
            ]
            if len(rows) > LIST_LIMIT:
                lines.append(f"…and {len(rows) - LIST_LIMIT} more.")
            text = "\n".join(lines)
        await interaction.response.send_message(text[:2000], ephemeral=True)

    @app_commands.command(name="delete", description="Delete a personality you own, with its memories")
    @app_commands.describe(personality="The personality to delete")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def delete(self, interaction: discord.Interaction[PersonaeBot], personality: str) -> None:
        service = self.runtime.personalities
        uid = user_id_of(interaction)
        p = await service.get(personality)
        service.require_manager(p, uid)

        async def delete_it() -> str:
            await service.delete(p.name, actor=uid)
            if self.runtime.memory is not None:
                # The rows are gone (cascade); this drops the personality's points from the index.
                await self.runtime.memory.reindex(personality_id=p.id)
            return f"Deleted **{p.display_name}** and all of its memories and conversations."

        await interaction.response.send_message(
            f"Delete **{p.display_name}** (`{p.name}`) with every memory and conversation it has? "
            "This cannot be undone.",
            view=ConfirmView(user_id=interaction.user.id, action=delete_it),
            ephemeral=True,
        )

    @app_commands.command(name="memory", description="Choose how a personality stores new memories")
    @app_commands.describe(
        personality="The personality to change",
        summarization="enabled: store condensed memories; disabled: store them word for word",
        mode="With summarization: summarized (condensed only) or hybrid (condensed plus the original)",
    )
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def memory(
        self,
        interaction: discord.Interaction[PersonaeBot],
        personality: str,
        summarization: Literal["enabled", "disabled"],
        mode: Literal["summarized", "hybrid"] | None = None,
    ) -> None:
        enabled = summarization == "enabled"
        p, previous = await self.runtime.personalities.set_summarization(
            personality, actor=user_id_of(interaction), enabled=enabled, mode=mode
        )
        new = MemoryMode(p.memory_mode)
        if new is previous:
            text = f"**{p.display_name}** already stores memories {new}; nothing changed."
        elif enabled:
            kept = " alongside the original wording" if new is MemoryMode.HYBRID else ""
            text = (
                f"**{p.display_name}** now stores new memories {new}: condensed by its summarizer{kept}, "
                "with roleplay formatting removed and names, dates and facts kept.\n"
                "Existing memories stay as they are until you run `/personality resummarize`. "
                "Users who chose their own summarization setting keep it."
            )
        else:
            text = (
                f"**{p.display_name}** now stores new memories verbatim. "
                "Existing summaries stay as they are. "
                "Users who chose their own summarization setting keep it."
            )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="summarizer-model", description="Choose the model that summarizes memories")
    @app_commands.describe(
        personality="The personality to change",
        model="An LLM config name, an allowed model string (e.g. openai/gpt-4o-mini), or 'default'",
    )
    @app_commands.autocomplete(personality=personality_autocomplete, model=model_autocomplete)
    async def summarizer_model(
        self,
        interaction: discord.Interaction[PersonaeBot],
        personality: str,
        model: app_commands.Range[str, 1, 200],
    ) -> None:
        p = await self.runtime.personalities.set_summarizer_model(
            personality, actor=user_id_of(interaction), model=model
        )
        chosen = describe_model(
            p.summarizer_llm_config and p.summarizer_llm_config.name, p.summarizer_model, "the bot's default"
        )
        await interaction.response.send_message(
            f"**{p.display_name}** now summarizes memories with {chosen}.", ephemeral=True
        )

    @app_commands.command(name="summarizer-prompt", description="Edit the prompt that summarizes memories")
    @app_commands.describe(personality="The personality whose summarizer prompt to edit")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def summarizer_prompt(
        self, interaction: discord.Interaction[PersonaeBot], personality: str
    ) -> None:
        service = self.runtime.personalities
        uid = user_id_of(interaction)
        p = await service.get(personality)
        service.require_manager(p, uid)

        async def save(text: str) -> str:
            saved = await service.set_summarizer_prompt(p.name, actor=uid, prompt=text)
            if saved.summarizer_prompt is None:
                return f"**{saved.display_name}** uses the default summarizer prompt again."
            return f"Saved **{saved.display_name}**'s summarizer prompt ({len(text.strip())} characters)."

        await interaction.response.send_modal(
            SummarizerPromptModal(current=await service.summarizer_prompt(p.name), save=save)
        )

    @app_commands.command(name="resummarize", description="Re-summarize existing memories in the background")
    @app_commands.describe(personality="The personality whose memories to re-summarize")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def resummarize(self, interaction: discord.Interaction[PersonaeBot], personality: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        service = self.runtime.personalities
        p = await service.get(personality)
        service.require_manager(p, user_id_of(interaction))
        memory = self.runtime.require_memory()
        stats = await memory.stats(personality_id=p.id)
        total = sum(r.memories for r in stats.rows if r.summarizer in ("verbatim", "extractive"))
        await interaction.edit_original_response(
            content=f"Re-summarizing {p.display_name}'s memories: 0 of {total}…"
        )
        done = 0
        edits: list[asyncio.Task[object]] = []

        def step(count: int) -> None:
            nonlocal done
            done += count
            edits.append(
                asyncio.create_task(
                    interaction.edit_original_response(
                        content=f"Re-summarizing {p.display_name}'s memories: {done} of {total}…"
                    )
                )
            )

        async def run() -> None:
            try:
                report = await memory.resummarize(p.id, progress=step)
                text = (
                    f"Re-summarized {report.memories} of {report.exchanges} memories of {p.display_name}; "
                    f"{report.extractive} left as they were (summarizer unavailable), "
                    f"{report.fidelity_misses} kept their original text for fidelity."
                )
            except UserFacingError as exc:
                text = str(exc)
            except Exception:
                log.exception("Re-summarizing %s failed", p.name)
                text = "Re-summarizing failed on our side; it has been logged. Run it again to resume."
            await asyncio.gather(*edits, return_exceptions=True)
            await interaction.edit_original_response(content=text)

        task = asyncio.create_task(run(), name=f"personae-resummarize-{p.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bind_target(
        self, interaction: discord.Interaction[PersonaeBot], personality: str
    ) -> Personality:
        p = await self.runtime.personalities.get(personality)
        if interaction.channel_id is None:
            raise UserFacingError("This command needs a channel.")
        self.runtime.personalities.require_binder(
            p,
            user_id_of(interaction),
            in_guild=interaction.guild_id is not None,
            can_manage_channel=interaction.permissions.manage_channels,
        )
        return p

    @app_commands.command(name="activate", description="Have a personality answer every message here")
    @app_commands.describe(personality="The personality to bind to this channel")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def activate(self, interaction: discord.Interaction[PersonaeBot], personality: str) -> None:
        p = await self._bind_target(interaction, personality)
        assert self.runtime.bindings is not None
        created = await self.runtime.bindings.bind(
            personality_id=p.id,
            channel_id=str(interaction.channel_id),
            guild_id=str(interaction.guild_id) if interaction.guild_id else None,
            user_id=user_id_of(interaction),
        )
        if not created:
            await reply_privately(interaction, f"**{p.display_name}** already answers in this channel.")
            return
        await interaction.response.send_message(f"**{p.display_name}** now answers every message here.")

    @app_commands.command(name="deactivate", description="Stop a personality answering every message here")
    @app_commands.describe(personality="The personality to unbind from this channel")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def deactivate(self, interaction: discord.Interaction[PersonaeBot], personality: str) -> None:
        p = await self._bind_target(interaction, personality)
        assert self.runtime.bindings is not None
        removed = await self.runtime.bindings.unbind(
            personality_id=p.id, channel_id=str(interaction.channel_id)
        )
        if not removed:
            await reply_privately(interaction, f"**{p.display_name}** was not bound to this channel.")
            return
        await interaction.response.send_message(
            f"**{p.display_name}** no longer answers every message here; it still answers when named."
        )


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(PersonalityCog(bot))
