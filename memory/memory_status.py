"""What /memory status and `personae memory status` report of a user's memory (MemoryService.status)."""

from __future__ import annotations

from dataclasses import dataclass

from memory.formation.stats import MemoryStats
from memory.owners.incognito import IncognitoSpan
from memory.types import MemoryMode, ModelConfig
from models import Persona, Personality, UserSettings


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    """A user's memory status, with one personality (mode, who set it, summarizer, the conversation
    here) or with all of them (their general settings)."""

    stats: MemoryStats
    personality: Personality | None
    incognito: list[IncognitoSpan]
    persona: Persona | None
    general_settings: UserSettings | None = None
    mode: MemoryMode | None = None  # None: memory off
    mode_set_by: str = ""
    summarizer: ModelConfig | None = None
    conversation_title: str | None = None
    fresh: bool = False  # replies use none of the user's memories (with this personality, or all)
