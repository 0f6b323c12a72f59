from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError
from memory.personalities import MAX_PROMPT_LENGTH, PersonalityService, slugify


@pytest.mark.parametrize(
    ("raw", "slug"),
    [("Lilith", "lilith"), ("Lilith the Wise!", "lilith-the-wise"), ("Zoë", "zoe"), ("  __x__ ", "x")],
)
def test_slugify(raw: str, slug: str) -> None:
    assert slugify(raw) == slug


async def test_create_is_idempotent_and_keeps_existing(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    first, created = await service.create("Lilith", prompt="Be sarcastic.", memory_mode="summarized")
    assert created
    again, created_again = await service.create("lilith", prompt="Different", memory_mode="hybrid")
    assert not created_again
    assert again.id == first.id
    assert (await service.get("LILITH")).system_prompt == "Be sarcastic."
    assert (await service.get("lilith")).memory_mode == "summarized"


async def test_list_and_missing(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    service = PersonalityService(sessionmaker)
    await service.create("Bob")
    await service.create("Alice", display_name="Alice A.")
    assert [p.name for p in await service.list()] == ["alice", "bob"]
    with pytest.raises(NotFoundError, match="personality list"):
        await service.get("nobody")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "!!!"},
        {"name": "ok", "memory_mode": "sometimes"},
        {"name": "ok", "prompt": "x" * (MAX_PROMPT_LENGTH + 1)},
    ],
    ids=["no-slug", "bad-mode", "long-prompt"],
)
async def test_bad_input_is_refused_clearly(
    sessionmaker: async_sessionmaker[AsyncSession], kwargs: dict[str, str]
) -> None:
    service = PersonalityService(sessionmaker)
    name = kwargs.pop("name")
    with pytest.raises(InvalidInputError):
        await service.create(name, **kwargs)  # type: ignore[arg-type]
    assert await service.list() == []
