"""Memory: each user sees, searches, steers and forgets their own memories (/memory, and the message
menus Remember this and Forget this), never anyone else's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.memory.cog import MemoryCog
from bot.memory.message_actions import MessageActions

if TYPE_CHECKING:
    from bot.client import PersonaeBot


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(MemoryCog(bot))
    await bot.add_cog(MessageActions(bot))
