"""/persona: tell the personalities who you are (for all of them, or for one), see it, clear it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from discord.ext import commands

from bot.interactions import Interaction, user_id_of
from bot.persona import texts
from bot.slash_commands import PersonaeCog, command
from memory.owners.personas import MAX_ABOUT_CHARS, MAX_NAME_CHARS, MAX_PRONOUNS_CHARS

if TYPE_CHECKING:
    from bot.client import PersonaeBot


class PersonaCog(
    PersonaeCog, commands.GroupCog, group_name="persona", group_description="Who you are to the personalities"
):
    """Thin commands over PersonaService; every reply is private."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        super().__init__()

    @command(
        "set",
        "Tell the personalities who you are",
        name=f"The name they call you (up to {MAX_NAME_CHARS} characters)",
        pronouns=f"Your pronouns, e.g. she/her (up to {MAX_PRONOUNS_CHARS} characters)",
        about=f"A few words about you they should know (up to {MAX_ABOUT_CHARS:,} characters)",
        personality="Only for this personality (default: for all of them)",
    )
    async def set_persona(
        self,
        interaction: Interaction,
        name: str,
        pronouns: str | None = None,
        about: str | None = None,
        personality: str | None = None,
    ) -> None:
        # No length limit on the options: the service's refusal says which field is over by how much.
        p = await self._personality(personality)
        persona = await self.runtime.personas.set(
            user_id_of(interaction), p.id if p else None, name=name, pronouns=pronouns, about=about
        )
        await interaction.response.send_message(texts.persona_saved(persona, p), ephemeral=True)

    @command(
        "show",
        "The persona the personalities know you by",
        personality="The persona this personality knows you by (default: your global one)",
    )
    async def show(self, interaction: Interaction, personality: str | None = None) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        personas = self.runtime.personas
        own = await personas.get(uid, p.id if p else None)
        general = await personas.get(uid) if p is not None else own
        # Without a personality: also the names the user goes by with single personalities.
        others = [(x, of) for x, of in await personas.all_of(uid) if of is not None] if p is None else []
        text = texts.persona_shown(p, own, general, others)
        await interaction.response.send_message(text, ephemeral=True)

    @command(
        "clear",
        "Remove your persona",
        personality="Only this personality's persona (default: your global one)",
    )
    async def clear(self, interaction: Interaction, personality: str | None = None) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        removed = await self.runtime.personas.clear(uid, p.id if p else None)
        general = await self.runtime.personas.get(uid) if p is not None and removed else None
        await interaction.response.send_message(texts.persona_cleared(p, removed, general), ephemeral=True)
