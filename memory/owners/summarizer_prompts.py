"""A personality's own summarizer prompt: one stored prompt row per personality, made, changed or
removed (back to the default prompt) with the personality row locked by the caller."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from memory.types import PromptType
from models import Personality, SystemPrompt


async def store_summarizer_prompt(session: AsyncSession, personality: Personality, text: str) -> None:
    """Make `text` the personality's summarizer prompt; an empty one goes back to the default."""
    old_prompt_id = personality.summarizer_prompt_id
    if not text:
        personality.summarizer_prompt_id = None
        if old_prompt_id is not None:
            await session.flush()  # the reference goes first: then the prompt row may go
            await session.execute(delete(SystemPrompt).where(SystemPrompt.id == old_prompt_id))
    elif old_prompt_id is not None:
        existing = await session.get(SystemPrompt, old_prompt_id)
        assert existing is not None
        existing.content = text
    else:
        stored = SystemPrompt(
            name=f"summarizer:{personality.name}", prompt_type=PromptType.SUMMARIZER.value, content=text
        )
        session.add(stored)
        await session.flush()
        personality.summarizer_prompt_id = stored.id
