"""What every slash command shares: `command`, a command and its options in one decorator, with the
`personality` and `model` options completed as the user types; and `PersonaeCog`, the base of every
cog, which reaches the services the one way cogs do (`runtime`) and finds personalities by name."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from discord import app_commands
from discord.ext import commands

from bot.interactions import Interaction, user_id_of

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from bot.runtime import Runtime
    from models import Personality

MAX_CHOICES = 25  # Discord shows at most this many autocomplete choices


class PersonaeCog(commands.Cog):
    """A cog of this bot: its services come from the runtime the bot was given, read when a command
    runs (the command publisher loads the cogs without one: publishing needs no database)."""

    bot: PersonaeBot

    @property
    def runtime(self) -> Runtime:
        return self.bot.runtime

    async def _personality(self, name: str | None) -> Personality | None:
        """The personality called `name`, relationships loaded; None when no name was given."""
        return await self.runtime.personalities.get_detailed(name) if name else None

    async def _managed_personality(self, interaction: Interaction, name: str) -> Personality:
        """The personality `name`, if the invoking user may manage it (else a PermissionDeniedError):
        for commands that ask something (a confirmation, a modal) before the service checks again."""
        service = self.runtime.personalities
        personality = await service.get(name)
        service.require_manager(personality, user_id_of(interaction))
        return personality

    async def complete_personality(
        self, interaction: Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        """Personalities whose name starts with what has been typed (at most 25)."""
        rows = await self.runtime.personalities.names_matching(current)
        return [app_commands.Choice(name=f"{display} ({name})"[:100], value=name) for name, display in rows]

    async def complete_model(self, interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        """LLM config names and allow-listed model prefixes that start with what has been typed."""
        names = [c.name for c in await self.runtime.llm_configs.list()]
        options = ["default", *names, *self.runtime.personalities.model_allow_list]
        matching = [o for o in options if o.startswith(current.strip())]
        return [app_commands.Choice(name=o, value=o) for o in matching][:MAX_CHOICES]


# Options that take a name, completed as the user types wherever a command has them.
COMPLETED = {"personality": PersonaeCog.complete_personality, "model": PersonaeCog.complete_model}


def command(
    name: str, description: str, /, **descriptions: str
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], app_commands.Command[Any, ..., None]]:
    """A slash command in one decorator: its name and description, its options described, and the
    `personality` and `model` options autocompleted (instead of `app_commands.command`,
    `app_commands.describe` and `app_commands.autocomplete` on every command)."""
    completed = {option: COMPLETED[option] for option in descriptions if option in COMPLETED}

    def declare(callback: Callable[..., Coroutine[Any, Any, None]]) -> app_commands.Command[Any, ..., None]:
        described = app_commands.describe(**descriptions)(callback)
        if completed:
            described = app_commands.autocomplete(**completed)(described)
        return app_commands.command(name=name, description=description)(described)

    return declare
