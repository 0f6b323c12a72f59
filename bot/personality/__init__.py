"""Personalities: their owners create, inspect and steer them (/personality), character cards in and out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.personality.cog import PersonalityCog

if TYPE_CHECKING:
    from bot.client import PersonaeBot


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(PersonalityCog(bot))
