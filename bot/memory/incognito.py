"""/memory incognito: the user talks on, and nothing they say forms a memory (a part of MemoryCog).

The span is kept by memory.owners.incognito; the message log marks what is said under it, so neither
the reply's own formation, a later catch-up nor `personae worker` ever forms it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.memory import texts
from bot.memory.status import id_of
from bot.slash_commands import PersonaeCog, command

# The choices of the `for` option; until turned off is the default: incognito never lapses unasked.
DURATIONS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "until off": None,
}


class IncognitoCommands(PersonaeCog):
    """/memory incognito (a part of MemoryCog)."""

    @command(
        "incognito",
        "Talk without forming memories, for a while or until off",
        state="on: nothing you say from now on becomes a memory; off: memories form again",
        personality="Only with this personality (default: with every personality)",
        duration="How long it stays on (default: until you turn it off)",
    )
    @app_commands.rename(duration="for")
    async def incognito(
        self,
        interaction: Interaction,
        state: Literal["on", "off"],
        personality: str | None = None,
        duration: Literal["1h", "1d", "until off"] = "until off",
    ) -> None:
        uid = user_id_of(interaction)
        p = await self._personality(personality)
        service = self.runtime.incognito
        if state == "on":
            span = await service.start(uid, id_of(p), DURATIONS[duration], asked_at=interaction.created_at)
            text = texts.incognito_started(span, self.runtime.settings.remembered_reaction)
        else:
            ended = await service.stop(uid, id_of(p))
            still = await service.active(uid, p.id) if p is not None else None
            text = texts.incognito_stopped(p, ended, still)
        await interaction.response.send_message(text, ephemeral=True)
