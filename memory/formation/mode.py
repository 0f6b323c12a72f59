"""Which memory mode a user's exchanges get with a personality, and who decided it.

The personality sets the mode (verbatim, summarized, hybrid) and may switch memory off; a user may
switch memory off or override summarization, for one personality or for all. The most specific
choice wins: the user's for this personality, then the user's general one, then the personality's.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.types import MemoryMode, SummarizationPreference
from models import Personality, UserSettings

PERSONALITY = "personality"
USER_FOR_PERSONALITY = "user (this personality)"
USER = "user"


def effective_mode(
    personality: Personality, user_settings: Sequence[UserSettings]
) -> tuple[MemoryMode | None, str]:
    """The mode memories of this user get (None: memory off) and where that choice comes from."""
    if not personality.memory_enabled:
        return None, PERSONALITY
    specific = next((s for s in user_settings if s.personality_id == personality.id), None)
    general = next((s for s in user_settings if s.personality_id is None), None)
    for source, setting in ((USER_FOR_PERSONALITY, specific), (USER, general)):
        if setting is not None and setting.memory_enabled is False:
            return None, source
    personality_mode = MemoryMode(personality.memory_mode)
    for source, setting in ((USER_FOR_PERSONALITY, specific), (USER, general)):
        if setting is None or setting.summarization == SummarizationPreference.DEFAULT:
            continue
        if setting.summarization == SummarizationPreference.DISABLED:
            return MemoryMode.VERBATIM, source
        keep_hybrid = personality_mode is MemoryMode.HYBRID
        return (MemoryMode.HYBRID if keep_hybrid else MemoryMode.SUMMARIZED), source
    return personality_mode, PERSONALITY
