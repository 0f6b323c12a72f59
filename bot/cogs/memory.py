"""/memory: each user sees and steers their own memories, never anyone else's."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from bot import replies
from bot.command_options import Interaction, memory_id_of, personality_autocomplete, user_id_of, venue_of
from bot.views import ConfirmView
from memory.errors import InvalidInputError, NotFoundError
from memory.formation.mode import effective_mode

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.runtime import Runtime
    from models import Personality

SEARCH_LIMIT = 5


def id_of(p: Personality | None) -> int | None:
    return p.id if p else None


class MemoryCog(commands.GroupCog, group_name="memory", group_description="Your long-term memories"):
    """Thin commands over MemoryService, UserSettingsService and ChatService; every reply is private."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        super().__init__()

    @property
    def runtime(self) -> Runtime:
        return self.bot.runtime

    async def _personality(self, name: str | None) -> Personality | None:
        return await self.runtime.personalities.get_detailed(name) if name else None

    def _confirm_forget(
        self, interaction: Interaction, p: Personality | None, done: str, label: str
    ) -> ConfirmView:
        """A button that deletes the user's memories (with `p`, or all) and says `done`."""

        async def forget_them() -> str:
            count = await self.runtime.memory.forget(user_id=user_id_of(interaction), personality_id=id_of(p))
            return done.format(count=count)

        return ConfirmView(user_id=interaction.user.id, action=forget_them, confirm_label=label)

    @app_commands.command(name="status", description="Your memory settings, storage and pending work")
    @app_commands.describe(personality="Only this personality (default: all of them)")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def status(self, interaction: Interaction, personality: str | None = None) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        stats = await self.runtime.memory.stats(personality_id=id_of(p), user_id=uid)
        if p is None:
            text = replies.overall_status(await self.runtime.user_settings.get(uid), stats)
        else:
            rows = await self.runtime.user_settings.for_personality(uid, p.id)
            mode, source = effective_mode(p, rows)
            venue = venue_of(interaction)
            title = await self.runtime.chat.conversation_title(
                personality_id=p.id, guild_id=venue.guild_id, channel_id=venue.channel_id, user_id=uid
            )
            summarizer = self.runtime.models.summarizer(p)
            text = replies.personality_status(p, mode, source, summarizer, title, stats)
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="settings", description="Your own memory preferences")
    @app_commands.describe(
        summarization="enabled: condensed; disabled: word for word; default: the personality's choice",
        memory="on: remember your conversations; off: stop storing new memories",
        personality="Only for this personality (default: for all of them)",
    )
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def settings(
        self,
        interaction: Interaction,
        summarization: Literal["enabled", "disabled", "default"] | None = None,
        memory: Literal["on", "off"] | None = None,
        personality: str | None = None,
    ) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        if summarization is None and memory is None:
            row = await self.runtime.user_settings.get(uid, id_of(p))
            await interaction.response.send_message(replies.settings_shown(p, row), ephemeral=True)
            return
        changes = {} if memory is None else {"memory_enabled": memory == "on"}
        saved = await self.runtime.user_settings.update(uid, id_of(p), summarization=summarization, **changes)
        text = replies.settings_saved(p, saved)
        if memory == "off":
            text += " No new memories will be stored."
            if existing := (await self.runtime.memory.stats(personality_id=id_of(p), user_id=uid)).memories:
                done = "Deleted {count} memories. No new ones will be stored."
                await interaction.response.send_message(
                    f"{text}\nDelete the {existing} memories already kept {replies.scope_of(p)}?",
                    view=self._confirm_forget(interaction, p, done, "Delete them"),
                    ephemeral=True,
                )
                return
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="search", description="Search your memories")
    @app_commands.describe(query="What to look for", personality="Only this personality's memories")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def search(
        self, interaction: Interaction, query: app_commands.Range[str, 1, 300], personality: str | None = None
    ) -> None:
        # Embedding the query can take a moment.
        await interaction.response.defer(ephemeral=True, thinking=True)
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        targets = [p] if p else list(await self.runtime.user_settings.personalities_remembering(uid))
        # guild None: the user's own search covers every venue; the reply is private.
        found = [
            (m, target)
            for target in targets
            for m in await self.runtime.memory.recall(
                personality_id=target.id, user_id=uid, query=query, limit=SEARCH_LIMIT
            )
        ]
        found.sort(key=lambda pair: -pair[0].score)
        await interaction.followup.send(replies.search_results(query, found[:SEARCH_LIMIT]), ephemeral=True)

    @app_commands.command(name="forget", description="Delete one of your memories, or all of them")
    @app_commands.describe(
        memory="A memory id from /memory search, or 'all'",
        personality="Only this personality's memories (with 'all')",
    )
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def forget(
        self, interaction: Interaction, memory: app_commands.Range[str, 1, 64], personality: str | None = None
    ) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        if memory.strip().lower() != "all":
            ids = [memory_id_of(memory)]
            await interaction.response.defer(ephemeral=True, thinking=True)
            if not await self.runtime.memory.forget(user_id=uid, personality_id=id_of(p), memory_ids=ids):
                raise NotFoundError(f"You have no memory with id {ids[0]}.")
            await interaction.followup.send("Forgotten. It will not come back in recall.", ephemeral=True)
            return
        existing = (await self.runtime.memory.stats(personality_id=id_of(p), user_id=uid)).memories
        scope = replies.scope_of(p)
        if not existing:
            await interaction.response.send_message(f"You have no memories {scope}.", ephemeral=True)
            return
        await interaction.response.send_message(
            f"Delete all {existing} of your memories {scope}? This cannot be undone.",
            view=self._confirm_forget(interaction, p, f"Deleted {{count}} memories {scope}.", "Delete"),
            ephemeral=True,
        )

    @app_commands.command(name="export", description="Download your memories as a JSONL file")
    @app_commands.describe(personality="Only this personality's memories")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def export(self, interaction: Interaction, personality: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        p = await self._personality(personality)
        lines = await self.runtime.user_settings.export_lines(
            user_id=user_id_of(interaction), personality_id=id_of(p)
        )
        if not lines:
            await interaction.followup.send("You have no memories to export.", ephemeral=True)
            return
        file = discord.File(
            io.BytesIO(("\n".join(lines) + "\n").encode()), filename=replies.export_filename(p)
        )
        await interaction.followup.send(replies.EXPORT_NOTE, file=file, ephemeral=True)

    @app_commands.command(name="reset", description="Clear the conversation summary in this channel")
    @app_commands.describe(personality="The personality whose conversation here to reset")
    @app_commands.autocomplete(personality=personality_autocomplete)
    async def reset(self, interaction: Interaction, personality: str | None = None) -> None:
        venue = venue_of(interaction)
        p = await self._personality(personality)
        if p is None:
            bindings = self.runtime.bindings
            bound = await bindings.bound_personalities([venue.channel_id]) if venue.channel_id else []
            if len(bound) != 1:
                raise InvalidInputError("Name the personality whose conversation here should be reset.")
            p = bound[0]
        removed = await self.runtime.chat.reset_conversation(
            personality_id=p.id, guild_id=venue.guild_id, channel_id=venue.channel_id, user_id=venue.user_id
        )
        await interaction.response.send_message(replies.conversation_reset(p, removed), ephemeral=True)


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(MemoryCog(bot))
