"""A personality's profile: /personality create, edit, info, list and delete (a part of PersonalityCog)."""

from __future__ import annotations

from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.personality import texts
from bot.personality.cards import release_card_avatar
from bot.slash_commands import PersonaeCog, command
from bot.views import ConfirmView
from memory.owners.personality_fields import MAX_DISPLAY_NAME_LENGTH, MAX_NAME_LENGTH, MAX_PROMPT_LENGTH


class ProfileCommands(PersonaeCog):
    """/personality create, edit, info, list and delete (a part of PersonalityCog)."""

    @command(
        "create",
        "Create a personality that you own",
        name="Short unique name used in commands (letters, digits, dashes)",
        display_name="Name shown on its messages",
        prompt="Its system prompt: who it is and how it talks",
        model="An LLM config name or an allowed model string (default: the bot's)",
        avatar="An https:// image URL for its avatar",
    )
    async def create(
        self,
        interaction: Interaction,
        name: app_commands.Range[str, 1, MAX_NAME_LENGTH],
        display_name: app_commands.Range[str, 1, MAX_DISPLAY_NAME_LENGTH],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
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

    @command(
        "edit",
        "Change a personality you own",
        personality="The personality to change",
        display_name="New name shown on its messages",
        prompt="New system prompt",
        model="An LLM config name, an allowed model string, or 'default'",
        avatar="New https:// avatar image URL ('none' removes it)",
    )
    async def edit(
        self,
        interaction: Interaction,
        personality: str,
        display_name: app_commands.Range[str, 1, MAX_DISPLAY_NAME_LENGTH] | None = None,
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH] | None = None,
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
            f"Updated.\n{texts.personality_card(p, show_prompt=True)}", ephemeral=True
        )

    @command("info", "Show a personality's settings", personality="The personality to show")
    async def info(self, interaction: Interaction, personality: str) -> None:
        p = await self.runtime.personalities.get_detailed(personality)
        manager = self.runtime.personalities.can_manage(p, user_id_of(interaction))
        stats = await self.runtime.memory.stats(personality_id=p.id) if manager else None
        await interaction.response.send_message(
            texts.personality_card(p, show_prompt=manager, stats=stats), ephemeral=True
        )

    @command("list", "List the personalities on this bot", mine="Only the personalities you own")
    async def list_(self, interaction: Interaction, mine: bool = False) -> None:
        uid = user_id_of(interaction)
        rows = await self.runtime.personalities.list(owner_id=uid if mine else None)
        await interaction.response.send_message(texts.personality_list(rows, uid), ephemeral=True)

    @command(
        "delete", "Delete a personality you own, with its memories", personality="The personality to delete"
    )
    async def delete(self, interaction: Interaction, personality: str) -> None:
        p = await self._managed_personality(interaction, personality)

        async def delete_it() -> str:
            runtime, actor = self.runtime, user_id_of(interaction)
            await runtime.memory.delete_personality(runtime.personalities, p.name, actor=actor)
            await release_card_avatar(self.bot, p.avatar_url)
            return f"Deleted **{p.display_name}** and all of its memories and conversations."

        await interaction.response.send_message(
            f"Delete **{p.display_name}** (`{p.name}`) with every memory and conversation it has? "
            "This cannot be undone.",
            view=ConfirmView(user_id=interaction.user.id, action=delete_it),
            ephemeral=True,
        )
