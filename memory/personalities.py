"""Personalities: create, read, update; the owner rules live here, not in the cogs."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError
from memory.types import MemoryMode
from models import Personality

MAX_NAME_LENGTH = 64
MAX_DISPLAY_NAME_LENGTH = 80
MAX_PROMPT_LENGTH = 8000
DEFAULT_PROMPT = "You are {display_name}. Stay in character, be concise and kind."


def slugify(name: str) -> str:
    """`Lilith the Wise` -> `lilith-the-wise`: the stable name used in commands and URLs."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9_]+", "-", ascii_name.lower()).strip("-_")
    return slug[:MAX_NAME_LENGTH].strip("-_")


def parse_memory_mode(value: str) -> MemoryMode:
    try:
        return MemoryMode(value.strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in MemoryMode)
        raise InvalidInputError(f"Unknown memory mode {value!r}; use one of: {allowed}.") from None


class PersonalityService:
    """Plain-id operations on personalities, each in its own unit of work."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def create(
        self,
        name: str,
        *,
        display_name: str | None = None,
        prompt: str | None = None,
        model: str | None = None,
        memory_mode: MemoryMode | str = MemoryMode.VERBATIM,
        owner_id: str | None = None,
        avatar_url: str | None = None,
    ) -> tuple[Personality, bool]:
        """Create a personality; an existing one of that name is returned unchanged with False."""
        slug = slugify(name)
        if not slug:
            raise InvalidInputError(f"{name!r} has no letters or digits to make a name from.")
        display = (display_name or name).strip()[:MAX_DISPLAY_NAME_LENGTH] or slug
        system_prompt = prompt if prompt is not None else DEFAULT_PROMPT.format(display_name=display)
        if len(system_prompt) > MAX_PROMPT_LENGTH:
            raise InvalidInputError(
                f"The prompt is {len(system_prompt)} characters; the limit is {MAX_PROMPT_LENGTH}."
            )
        mode = parse_memory_mode(str(memory_mode))
        existing = await self.find(slug)
        if existing is not None:
            return existing, False
        personality = Personality(
            name=slug,
            display_name=display,
            system_prompt=system_prompt,
            chat_model=model,
            memory_mode=mode.value,
            owner_id=owner_id,
            avatar_url=avatar_url,
        )
        try:
            async with self._sessionmaker.begin() as session:
                session.add(personality)
        except IntegrityError:
            # Another process created it between our look-up and insert: theirs stands.
            found = await self.find(slug)
            if found is None:
                raise
            return found, False
        return personality, True

    async def find(self, name: str) -> Personality | None:
        async with self._sessionmaker() as session:
            return await session.scalar(select(Personality).where(Personality.name == slugify(name)))

    async def get(self, name: str) -> Personality:
        """The personality called `name`, or a NotFoundError that says how to list them."""
        personality = await self.find(name)
        if personality is None:
            raise NotFoundError(f"No personality named {name!r}; `personae personality list` shows them.")
        return personality

    async def get_by_id(self, personality_id: int) -> Personality:
        async with self._sessionmaker() as session:
            personality = await session.get(Personality, personality_id)
        if personality is None:
            raise NotFoundError(f"No personality with id {personality_id}.")
        return personality

    async def list(self) -> Sequence[Personality]:
        async with self._sessionmaker() as session:
            return (await session.scalars(select(Personality).order_by(Personality.name))).all()
