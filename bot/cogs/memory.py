"""/memory: each user sees and steers their own memories, never anyone else's."""

from __future__ import annotations

import io
import logging
import uuid
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from bot.cogs.personality import personality_autocomplete, user_id_of
from bot.views import ConfirmView
from memory.conversations import Venue
from memory.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.runtime import Runtime
    from memory.owners.user_settings import UserSettingsService
    from models import Personality

log = logging.getLogger(__name__)

SEARCH_LIMIT = 5
EXCERPT_CHARS = 160


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


class MemoryCog(commands.GroupCog, group_name="memory", group_description="Your long-term memories"):
    """Thin commands over MemoryService and UserSettingsService; every reply is private."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        super().__init__()

    @property
    def runtime(self) -> Runtime:
        return self.bot.runtime

    @property
    def user_settings(self) -> UserSettingsService:
        assert self.runtime.user_settings is not None
        return self.runtime.user_settings

    async def _personality(self, name: str | None) -> Personality | None:
        return await self.runtime.personalities.get_detailed(name) if name else None

    @app_commands.command(name="status", description="Your memory settings, storage and pending work")
    @app_commands.describe(personality="Only this personality (default: all of them)")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def status(
        self, interaction: discord.Interaction[PersonaeBot], personality: str | None = None
    ) -> None:
        uid = user_id_of(interaction)
        memory = self.runtime.require_memory()
        p = await self._personality(personality)
        lines: list[str] = []
        if p is not None:
            rows = await self.user_settings.for_personality(uid, p.id)
            mode, source = memory.effective_mode(p, rows)
            cfg = memory.summarizer_config(p)
            lines.append(f"**{p.display_name}** and you")
            lines.append(f"Memory: {'on' if mode else 'off'} (set by {source})")
            if mode is not None:
                lines.append(f"Stored as: {mode} (set by {source})")
            lines.append(f"Summarizer model: {cfg.model if cfg else 'none (extractive summaries)'}")
            if self.runtime.chat is not None:
                title = await self.runtime.chat.conversation_title(
                    personality_id=p.id,
                    guild_id=str(interaction.guild_id) if interaction.guild_id else None,
                    channel_id=str(interaction.channel_id) if interaction.channel_id else None,
                    user_id=uid,
                )
                if title:
                    lines.append(f"Conversation here: {title}")
        else:
            general = await self.user_settings.get(uid)
            enabled = general.memory_enabled if general else None
            lines.append("**All personalities**")
            lines.append(
                "Memory: " + {None: "on unless a personality turns it off", True: "on", False: "off"}[enabled]
            )
            lines.append(
                f"Summarization: {general.summarization if general else 'default'} "
                "(default = each personality's choice)"
            )
        stats = await memory.stats(personality_id=p.id if p else None, user_id=uid)
        lines.append(f"Memories: {stats.memories}")
        lines.append(
            f"Storage: {kib(stats.stored_bytes)} (verbatim would be {kib(stats.source_bytes)}, "
            f"saving {stats.saving_percent:.0f}%)"
        )
        if p is not None:
            lines.append(f"Pending: {stats.pending_messages} messages waiting to become memories")
        await interaction.response.send_message("\n".join(lines), ephemeral=True)

    @app_commands.command(name="settings", description="Your own memory preferences")
    @app_commands.describe(
        summarization="enabled: condensed; disabled: word for word; default: the personality's choice",
        memory="on: remember your conversations; off: stop storing new memories",
        personality="Only for this personality (default: for all of them)",
    )
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def settings(
        self,
        interaction: discord.Interaction[PersonaeBot],
        summarization: Literal["enabled", "disabled", "default"] | None = None,
        memory: Literal["on", "off"] | None = None,
        personality: str | None = None,
    ) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        scope = f"with **{p.display_name}**" if p else "with every personality"
        if summarization is None and memory is None:
            row = await self.user_settings.get(uid, p.id if p else None)
            state = {None: "inherited", True: "on", False: "off"}[row.memory_enabled if row else None]
            await interaction.response.send_message(
                f"Your settings {scope}: memory {state}, summarization "
                f"{row.summarization if row else 'default'}.",
                ephemeral=True,
            )
            return
        scope_id = p.id if p else None
        if memory is None:
            row = await self.user_settings.update(uid, scope_id, summarization=summarization)
        else:
            row = await self.user_settings.update(
                uid, scope_id, summarization=summarization, memory_enabled=memory == "on"
            )
        state = {None: "inherited", True: "on", False: "off"}[row.memory_enabled]
        text = f"Saved: {scope}, memory {state}, summarization {row.summarization}."
        if memory != "off":
            await interaction.response.send_message(text, ephemeral=True)
            return
        service = self.runtime.require_memory()
        existing = (await service.stats(personality_id=p.id if p else None, user_id=uid)).memories
        if not existing:
            await interaction.response.send_message(text + " No new memories will be stored.", ephemeral=True)
            return

        async def forget_them() -> str:
            count = await service.forget(user_id=uid, personality_id=p.id if p else None)
            return f"Deleted {count} memories. No new ones will be stored."

        await interaction.response.send_message(
            f"{text} No new memories will be stored.\nDelete the {existing} memories already kept {scope}?",
            view=ConfirmView(user_id=interaction.user.id, action=forget_them, confirm_label="Delete them"),
            ephemeral=True,
        )

    @app_commands.command(name="search", description="Search your memories")
    @app_commands.describe(query="What to look for", personality="Only this personality's memories")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def search(
        self,
        interaction: discord.Interaction[PersonaeBot],
        query: app_commands.Range[str, 1, 300],
        personality: str | None = None,
    ) -> None:
        # Embedding the query can take a moment.
        await interaction.response.defer(ephemeral=True, thinking=True)
        uid = user_id_of(interaction)
        memory = self.runtime.require_memory()
        p = await self._personality(personality)
        targets = [p] if p else list(await self.user_settings.personalities_remembering(uid))
        found = []
        for target in targets:
            # guild None: the user's own search covers every venue; the reply is private.
            for m in await memory.recall(
                personality_id=target.id, user_id=uid, query=query, limit=SEARCH_LIMIT
            ):
                found.append((m, target))
        found.sort(key=lambda pair: -pair[0].score)
        if not found:
            await interaction.followup.send("No memories match that.", ephemeral=True)
            return
        lines = [f"Your memories matching “{excerpt(query, 60)}”:"]
        for m, target in found[:SEARCH_LIMIT]:
            lines.append(f"`{m.id}` {m.occurred_at:%Y-%m-%d}, {target.display_name}: {excerpt(m.content)}")
        lines.append("Forget one with `/memory forget memory:<id>`.")
        await interaction.followup.send("\n".join(lines)[:2000], ephemeral=True)

    @app_commands.command(name="forget", description="Delete one of your memories, or all of them")
    @app_commands.describe(
        memory="A memory id from /memory search, or 'all'",
        personality="Only this personality's memories (with 'all')",
    )
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def forget(
        self,
        interaction: discord.Interaction[PersonaeBot],
        memory: app_commands.Range[str, 1, 64],
        personality: str | None = None,
    ) -> None:
        uid = user_id_of(interaction)
        service = self.runtime.require_memory()
        p = await self._personality(personality)
        if memory.strip().lower() != "all":
            try:
                memory_id = uuid.UUID(memory.strip())
            except ValueError:
                raise InvalidInputError(
                    f"{memory!r} is not a memory id; `/memory search` shows ids, or use 'all'."
                ) from None
            await interaction.response.defer(ephemeral=True, thinking=True)
            count = await service.forget(
                user_id=uid, personality_id=p.id if p else None, memory_ids=[memory_id]
            )
            if not count:
                raise NotFoundError(f"You have no memory with id {memory_id}.")
            await interaction.followup.send("Forgotten. It will not come back in recall.", ephemeral=True)
            return
        existing = (await service.stats(personality_id=p.id if p else None, user_id=uid)).memories
        scope = f"with **{p.display_name}**" if p else "with every personality"
        if not existing:
            await interaction.response.send_message(f"You have no memories {scope}.", ephemeral=True)
            return

        async def forget_all() -> str:
            count = await service.forget(user_id=uid, personality_id=p.id if p else None)
            return f"Deleted {count} memories {scope}."

        await interaction.response.send_message(
            f"Delete all {existing} of your memories {scope}? This cannot be undone.",
            view=ConfirmView(user_id=interaction.user.id, action=forget_all),
            ephemeral=True,
        )

    @app_commands.command(name="export", description="Download your memories as a JSONL file")
    @app_commands.describe(personality="Only this personality's memories")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def export(
        self, interaction: discord.Interaction[PersonaeBot], personality: str | None = None
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        lines = await self.user_settings.export_lines(user_id=uid, personality_id=p.id if p else None)
        if not lines:
            await interaction.followup.send("You have no memories to export.", ephemeral=True)
            return
        data = ("\n".join(lines) + "\n").encode()
        filename = f"personae-memories-{p.name if p else 'all'}.jsonl"
        await interaction.followup.send(
            "Your memories: one line per message, each exchange's memory on its last line. "
            "`personae import` reads this file.",
            file=discord.File(io.BytesIO(data), filename=filename),
            ephemeral=True,
        )

    @app_commands.command(name="reset", description="Clear the conversation summary in this channel")
    @app_commands.describe(personality="The personality whose conversation here to reset")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def reset(
        self, interaction: discord.Interaction[PersonaeBot], personality: str | None = None
    ) -> None:
        uid = user_id_of(interaction)
        channel_id = str(interaction.channel_id) if interaction.channel_id else None
        guild_id = str(interaction.guild_id) if interaction.guild_id else None
        p = await self._personality(personality)
        if p is None:
            bound = (
                await self.runtime.bindings.bound_personalities([channel_id])
                if self.runtime.bindings and channel_id
                else []
            )
            if len(bound) != 1:
                raise InvalidInputError("Name the personality whose conversation here should be reset.")
            p = bound[0]
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=uid)
        removed = await self.user_settings.reset_conversation_summary(p.id, venue)
        text = (
            f"Cleared the conversation summary of **{p.display_name}** here."
            if removed
            else f"**{p.display_name}** has no conversation summary here; nothing to clear."
        )
        await interaction.response.send_message(text + " Long-term memories are untouched.", ephemeral=True)


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(MemoryCog(bot))
