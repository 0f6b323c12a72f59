"""Chat: messages that address a personality answered as that personality, what was missed while the
bot was away caught up, and the 🔄 that answers again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.chat.cog import ChatCog

if TYPE_CHECKING:
    from bot.client import PersonaeBot


async def setup(bot: PersonaeBot) -> None:
    await bot.add_cog(ChatCog(bot))
