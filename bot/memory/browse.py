"""/memory browse: page through your own memories and pin, correct or forget them (part of MemoryCog).

The command reads the first page and hands the rest to BrowseView (browse_view.py); everything is
private to the user, in DMs and guilds alike.
"""

from __future__ import annotations

from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.memory import texts
from bot.memory.browse_view import BrowseListing, BrowseView
from bot.slash_commands import PersonaeCog, command
from bot.texts import excerpt

MAX_QUERY_CHARS = 300
# What to look for in one's memories (/memory search and browse).
SearchQuery = app_commands.Range[str, 1, MAX_QUERY_CHARS]


class BrowseCommands(PersonaeCog):
    """/memory browse (a part of MemoryCog)."""

    @command(
        "browse",
        "Page through your memories to pin, correct or forget them",
        personality="Only this personality's memories",
        query="Best matches for this first (default: newest first)",
    )
    async def browse(
        self,
        interaction: Interaction,
        personality: str | None = None,
        query: SearchQuery | None = None,
    ) -> None:
        # A search embeds the query: it can take a moment.
        await interaction.response.defer(ephemeral=True, thinking=True)
        runtime = self.runtime
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        personality_id = p.id if p else None
        scope = texts.scope_of(p)
        if query and query.strip():
            matches = await runtime.memory.best_matches(
                user_id=uid, query=query, personality_id=personality_id
            )
            listing = BrowseListing(
                runtime.memory,
                uid,
                personality_id,
                f"{scope} matching “{excerpt(query, 60)}”",
                matches,
            )
        else:
            listing = BrowseListing(runtime.memory, uid, personality_id, f"{scope}, newest first")
        view = BrowseView(listing, owner_id=interaction.user.id)
        await view.load()
        if not view.memories:
            empty = (
                "No memories match that." if listing.matches is not None else f"You have no memories {scope}."
            )
            await interaction.followup.send(empty, ephemeral=True)
            return
        await interaction.followup.send(view.content(), view=view, ephemeral=True)
