"""/personality: create, inspect and steer personalities. Permission rules live in the services.

The group's commands come in parts: its profile (profile.py: create, edit, info, list, delete), its
character card (cards.py), how it summarizes its memories (summarization.py), the channels it
answers in (bindings.py) and its lorebook (lore.py); discord.py collects the commands of every base
class into the one cog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from discord.ext import commands

from bot.personality.bindings import ChannelBindingCommands
from bot.personality.cards import CardCommands
from bot.personality.lore import LoreCommands
from bot.personality.profile import ProfileCommands
from bot.personality.summarization import SummarizationCommands

if TYPE_CHECKING:
    from bot.client import PersonaeBot


class PersonalityCog(
    LoreCommands,
    ChannelBindingCommands,
    SummarizationCommands,
    CardCommands,
    ProfileCommands,
    commands.GroupCog,
    group_name="personality",
    group_description="Manage personalities",
):
    """Thin commands over PersonalityService, BindingService and MemoryService; the group's commands
    are those of its parts, in the order of `personae sync-commands`: profile, cards, summarization,
    bindings, lore."""

    def __init__(self, bot: PersonaeBot) -> None:
        self.bot = bot
        super().__init__()
