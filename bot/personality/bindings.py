"""Which channels a personality answers every message in: /personality activate and deactivate. A
personality activated where no conversation with it has begun greets the channel (it dispatches
GREETING_EVENT; bot.chat.greeting answers it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.events import GREETING_EVENT
from bot.interactions import Interaction, reply_privately, user_id_of
from bot.slash_commands import PersonaeCog, command
from memory.errors import UserFacingError

if TYPE_CHECKING:
    from models import Personality


class ChannelBindingCommands(PersonaeCog):
    """/personality activate and deactivate (a part of PersonalityCog); the service checks who may."""

    async def _bind_target(self, interaction: Interaction, personality: str) -> Personality:
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

    @command(
        "activate",
        "Have a personality answer every message here",
        personality="The personality to bind to this channel",
    )
    async def activate(self, interaction: Interaction, personality: str) -> None:
        p = await self._bind_target(interaction, personality)
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
        guild_id = str(interaction.guild_id) if interaction.guild_id else None
        self.bot.dispatch(GREETING_EVENT, interaction.channel, guild_id, p.id, interaction.user)

    @command(
        "deactivate",
        "Stop a personality answering every message here",
        personality="The personality to unbind from this channel",
    )
    async def deactivate(self, interaction: Interaction, personality: str) -> None:
        p = await self._bind_target(interaction, personality)
        removed = await self.runtime.bindings.unbind(
            personality_id=p.id, channel_id=str(interaction.channel_id)
        )
        if not removed:
            await reply_privately(interaction, f"**{p.display_name}** was not bound to this channel.")
            return
        await interaction.response.send_message(
            f"**{p.display_name}** no longer answers every message here; it still answers when named."
        )
