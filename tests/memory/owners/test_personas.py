"""Personas: one global and one per personality for each user, the personality's own winning, with
limits that say which field is too long; and the persona lines of a user's export."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.runtime import Runtime
from memory.errors import InvalidInputError
from memory.owners.personalities import PersonalityService
from memory.owners.personas import MAX_ABOUT_CHARS, PersonaService
from memory.transfer.export import MemoryExport
from models import Persona


async def test_global_and_per_personality_personas(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    sage, _ = await PersonalityService(sessionmaker).create("Sage")
    lilith, _ = await PersonalityService(sessionmaker).create("Lilith")
    personas = PersonaService(sessionmaker)
    assert await personas.effective("1", sage.id) is None

    general = await personas.set("1", name="  Alice ", pronouns="she/her", about="A cartographer.")
    assert (general.personality_id, general.name, general.pronouns) == (None, "Alice", "she/her")
    own = await personas.set("1", sage.id, name="Captain Al")
    assert (await personas.effective("1", sage.id)).id == own.id  # type: ignore[union-attr]
    assert (await personas.effective("1", lilith.id)).id == general.id  # type: ignore[union-attr]
    assert await personas.effective("2", sage.id) is None

    # Setting again replaces the whole persona of that scope, in the same row.
    again = await personas.set("1", name="Alicia", about="")
    assert (again.id, again.name, again.pronouns, again.about) == (general.id, "Alicia", None, None)
    async with sessionmaker() as session:
        assert await session.scalar(select(func.count(Persona.id))) == 2
    assert [(p.name, of.name if of else None) for p, of in await personas.all_of("1")] == [
        ("Alicia", None),
        ("Captain Al", "sage"),
    ]

    assert await personas.clear("1", sage.id) is True
    assert await personas.clear("1", sage.id) is False
    assert (await personas.effective("1", sage.id)).name == "Alicia"  # type: ignore[union-attr]
    assert await personas.clear("1") is True
    assert await personas.effective("1", sage.id) is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "   "}, "A persona needs a name."),
        ({"name": "x" * 81}, "The name can be at most 80 characters long (81 given)."),
        ({"name": "Al", "pronouns": "p" * 41}, "The pronouns can be at most 40 characters long (41 given)."),
        (
            {"name": "Al", "about": "a" * 1001},
            "The about text can be at most 1,000 characters long (1,001 given).",
        ),
    ],
)
async def test_limits_say_which_field_is_too_long(
    sessionmaker: async_sessionmaker[AsyncSession], fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await PersonaService(sessionmaker).set("1", **fields)
    assert str(refused.value) == message
    # At the limit it fits.
    saved = await PersonaService(sessionmaker).set("1", name="x" * 80, about="a" * MAX_ABOUT_CHARS)
    assert len(saved.about or "") == MAX_ABOUT_CHARS


async def test_the_export_carries_the_users_personas(runtime: Runtime) -> None:
    sage, _ = await runtime.personalities.create("Sage")
    lilith, _ = await runtime.personalities.create("Lilith")
    await runtime.personas.set("1", name="Alice", pronouns="she/her", about="Maps.")
    await runtime.personas.set("1", sage.id, name="Captain Al")
    await runtime.personas.set("1", lilith.id, name="Lady Al")
    await runtime.personas.set("2", name="Bob")
    service: MemoryExport = runtime.transfer

    def personas(lines: list[str]) -> list[dict[str, Any]]:
        return [json.loads(line)["persona"] for line in lines if "persona" in json.loads(line)]

    everything = personas(await service.export_lines(user_id="1"))
    assert everything == [
        {"personality": None, "name": "Alice", "pronouns": "she/her", "about": "Maps."},
        {"personality": "lilith", "name": "Lady Al", "pronouns": None, "about": None},
        {"personality": "sage", "name": "Captain Al", "pronouns": None, "about": None},
    ]
    # One personality's export: the persona it knows and the global one, nobody else's.
    for_sage = personas(await service.export_lines(user_id="1", personality_id=sage.id))
    assert [p["name"] for p in for_sage] == ["Alice", "Captain Al"]
