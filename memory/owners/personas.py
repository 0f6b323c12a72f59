"""Personas: who a user is to the personalities (a name, pronouns, a few lines about them).

A user has at most one global persona (personality None) and one per personality; the one for a
personality wins over the global one (`effective`). The chat prompt carries the persona of the user
being answered (memory.chat.prompt), and `/memory export` carries every persona of the user.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from memory.errors import InvalidInputError
from memory.owners.user_settings import upsert_scoped
from models import Persona, Personality

# The columns' limits (models.Persona), checked here so the user reads which one was too long.
MAX_NAME_CHARS = 80
MAX_PRONOUNS_CHARS = 40
MAX_ABOUT_CHARS = 1000


def _field(value: str | None, label: str, limit: int) -> str | None:
    """The value with its surrounding whitespace removed; None when empty; refused when too long."""
    if value is None:
        return None
    value = value.strip()
    if len(value) > limit:
        raise InvalidInputError(
            f"The {label} can be at most {limit:,} characters long ({len(value):,} given)."
        )
    return value or None


def _scope(personality_id: int | None) -> ColumnElement[bool]:
    if personality_id is None:
        return Persona.personality_id.is_(None)
    return Persona.personality_id == personality_id


async def personas_for(
    session: AsyncSession, user_ids: Collection[str], personality_id: int
) -> dict[str, Persona]:
    """The effective persona of each of these users with this personality (its own, else the global
    one), in one query; users without one are left out."""
    if not user_ids:
        return {}
    rows = (
        await session.scalars(
            select(Persona).where(
                Persona.user_id.in_(sorted(set(user_ids))),
                or_(Persona.personality_id.is_(None), Persona.personality_id == personality_id),
            )
        )
    ).all()
    found: dict[str, Persona] = {}
    for row in rows:
        # The personality's own persona wins over the global one.
        if row.user_id not in found or row.personality_id is not None:
            found[row.user_id] = row
    return found


class PersonaService:
    """Sets, reads and clears a user's personas, each in its own unit of work."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def set(
        self,
        user_id: str,
        personality_id: int | None = None,
        *,
        name: str,
        pronouns: str | None = None,
        about: str | None = None,
    ) -> Persona:
        """Replace the user's persona for that scope (global when personality_id is None) with this one."""
        values = {
            "name": _field(name, "name", MAX_NAME_CHARS),
            "pronouns": _field(pronouns, "pronouns", MAX_PRONOUNS_CHARS),
            "about": _field(about, "about text", MAX_ABOUT_CHARS),
        }
        if values["name"] is None:
            raise InvalidInputError("A persona needs a name.")
        async with self._sessionmaker.begin() as session:
            return await upsert_scoped(session, Persona, user_id, personality_id, values)

    async def get(self, user_id: str, personality_id: int | None = None) -> Persona | None:
        """The user's persona for exactly that scope, None when there is none."""
        async with self._sessionmaker() as session:
            return await session.scalar(
                select(Persona).where(Persona.user_id == user_id, _scope(personality_id))
            )

    async def effective(self, user_id: str, personality_id: int) -> Persona | None:
        """The persona this personality knows the user by: its own, else the global one."""
        async with self._sessionmaker() as session:
            return (await personas_for(session, [user_id], personality_id)).get(user_id)

    async def clear(self, user_id: str, personality_id: int | None = None) -> bool:
        """Remove the user's persona for that scope; False when there was none."""
        async with self._sessionmaker.begin() as session:
            removed = await session.scalars(
                delete(Persona)
                .where(Persona.user_id == user_id, _scope(personality_id))
                .returning(Persona.id)
            )
            return removed.first() is not None

    async def all_of(self, user_id: str) -> list[tuple[Persona, Personality | None]]:
        """Every persona of the user with its personality (None: the global one, which comes first)."""
        async with self._sessionmaker() as session:
            rows = await session.execute(
                select(Persona, Personality)
                .outerjoin(Personality, Personality.id == Persona.personality_id)
                .where(Persona.user_id == user_id)
                .order_by(Persona.personality_id.is_not(None), Personality.name)
            )
            return [(persona, personality) for persona, personality in rows.all()]
