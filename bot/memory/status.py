"""/memory status, settings and fresh: how the user's memory behaves (a part of MemoryCog), and the
confirmation that deletes memories (/memory settings memory:off, /memory forget all)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from bot.interactions import Interaction, user_id_of, venue_of
from bot.memory import texts
from bot.slash_commands import PersonaeCog, command
from bot.views import ConfirmView

if TYPE_CHECKING:
    from memory.service import MemoryService
    from models import Personality


def id_of(p: Personality | None) -> int | None:
    return p.id if p else None


def confirm_forget(
    memory: MemoryService, interaction: Interaction, p: Personality | None, done: str, label: str
) -> ConfirmView:
    """A button that deletes the user's memories (with `p`, or all) and says `done`."""

    async def forget_them() -> str:
        count = await memory.forget(user_id=user_id_of(interaction), personality_id=id_of(p))
        return done.format(count=count)

    return ConfirmView(user_id=interaction.user.id, action=forget_them, confirm_label=label)


class StatusCommands(PersonaeCog):
    """/memory status, settings and fresh (a part of MemoryCog)."""

    @command(
        "status",
        "Your memory settings, storage and pending work",
        personality="Only this personality (default: all of them)",
    )
    async def status(self, interaction: Interaction, personality: str | None = None) -> None:
        p = await self._personality(personality)
        status = await self.runtime.memory.status(
            user_id=user_id_of(interaction), personality=p, venue=venue_of(interaction)
        )
        await interaction.response.send_message(texts.memory_status(status), ephemeral=True)

    @command(
        "settings",
        "Your own memory preferences",
        summarization="enabled: condensed; disabled: word for word; default: the personality's choice",
        memory="on: remember your conversations; off: stop storing new memories",
        personality="Only for this personality (default: for all of them)",
    )
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
            await interaction.response.send_message(texts.settings_shown(p, row), ephemeral=True)
            return
        changes = {} if memory is None else {"memory_enabled": memory == "on"}
        saved = await self.runtime.user_settings.update(uid, id_of(p), summarization=summarization, **changes)
        text = texts.settings_saved(p, saved)
        if memory == "off":
            text += " No new memories will be stored."
            if existing := (await self.runtime.memory.stats(personality_id=id_of(p), user_id=uid)).memories:
                done = "Deleted {count} memories. No new ones will be stored."
                await interaction.response.send_message(
                    f"{text}\nDelete the {existing} memories already kept {texts.scope_of(p)}?",
                    view=confirm_forget(self.runtime.memory, interaction, p, done, "Delete them"),
                    ephemeral=True,
                )
                return
        await interaction.response.send_message(text, ephemeral=True)

    @command(
        "fresh",
        "Replies stop using your memories (nothing is deleted; new ones still form)",
        state="on: replies use none of your memories; off: they use them again",
        personality="Only with this personality (default: with all of them)",
    )
    async def fresh(
        self, interaction: Interaction, state: Literal["on", "off"], personality: str | None = None
    ) -> None:
        p = await self._personality(personality)
        on = await self.runtime.user_settings.set_fresh(user_id_of(interaction), state == "on", id_of(p))
        await interaction.response.send_message(texts.fresh_set(p, on), ephemeral=True)
