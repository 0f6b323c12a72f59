from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError
from memory.formation.mode import effective_mode
from memory.owners.personalities import PersonalityService
from memory.owners.user_settings import UserSettingsService
from models import UserSettings


async def test_update_upserts_global_and_per_personality_rows(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    sage, _ = await personalities.create("Sage", memory_mode="summarized")
    service = UserSettingsService(sessionmaker)
    assert await service.get("1") is None

    general = await service.update("1", memory_enabled=False)
    assert (general.personality_id, general.memory_enabled, general.summarization) == (None, False, "default")
    specific = await service.update("1", sage.id, summarization="disabled")
    assert (specific.personality_id, specific.memory_enabled, specific.summarization) == (
        sage.id,
        None,
        "disabled",
    )
    # Updating again changes only what is given, in the same row.
    again = await service.update("1", summarization="enabled")
    assert (again.id, again.memory_enabled, again.summarization) == (general.id, False, "enabled")
    again = await service.update("1", memory_enabled=None)
    assert again.memory_enabled is None and again.summarization == "enabled"
    async with sessionmaker() as session:
        assert await session.scalar(select(func.count(UserSettings.id))) == 2

    rows = await service.for_personality("1", sage.id)
    mode, source = effective_mode(sage, rows)
    assert (mode, source) == ("verbatim", "user (this personality)")
    assert await service.for_personality("2", sage.id) == []


async def test_bad_summarization_value_is_refused(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    with pytest.raises(InvalidInputError, match="default, enabled, disabled"):
        await UserSettingsService(sessionmaker).update("1", summarization="sometimes")
