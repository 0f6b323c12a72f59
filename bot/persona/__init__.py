"""Personas: each user tells the personalities who they are (/persona), for all of them or for one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.persona.cog import PersonaCog

if TYPE_CHECKING:
    from bot.client import PersonaeBot


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(PersonaCog(bot))
