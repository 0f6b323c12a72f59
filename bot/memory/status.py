"""/memory status and settings: how the user's memory behaves (part of MemoryCog), and what every part
of the cog reads: the runtime, a personality by name, the confirmation that deletes memories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from bot import replies
from bot.command_options import CommandPart, Interaction, command, user_id_of, venue_of
from bot.views import ConfirmView

if TYPE_CHECKING:
    from models import Personality


def id_of(p: Personality | None) -> int | None:
    return p.id if p else None


class MemoryPart(CommandPart):
    """What the parts of MemoryCog share."""

    def _confirm_forget(
        self, interaction: Interaction, p: Personality | None, done: str, label: str
    ) -> ConfirmView:
        """A button that deletes the user's memories (with `p`, or all) and says `done`."""

        async def forget_them() -> str:
            count = await self.runtime.memory.forget(user_id=user_id_of(interaction), personality_id=id_of(p))
            return done.format(count=count)

        return ConfirmView(user_id=interaction.user.id, action=forget_them, confirm_label=label)


class SettingsCommands(MemoryPart):
    """/memory status and settings (part of MemoryCog)."""

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
        await interaction.response.send_message(replies.memory_status(status), ephemeral=True)

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
