"""A user's own memory preferences: the settings that steer their memories (the JSONL export of them is
memory.transfer.export).

Fresh mode is one of them: replies use none of the user's long-term memories (with one personality,
or all), which still form unless incognito is on. The row for a personality overrides the global one
(`fresh_mode`); recall reads it for a reply's prompt (memory.recall.search, `for_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import BindParameter, ScalarSelect, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError
from memory.types import SummarizationPreference
from models import Persona, UserSettings

_UNSET: Any = object()


def parse_summarization(value: str) -> SummarizationPreference:
    try:
        return SummarizationPreference(value.strip().lower())
    except ValueError:
        allowed = ", ".join(p.value for p in SummarizationPreference)
        raise InvalidInputError(f"Unknown summarization setting {value!r}; use one of: {allowed}.") from None


def fresh_mode(rows: Sequence[UserSettings]) -> bool:
    """Whether fresh mode is on, from the user's rows for a personality (its own, then the global one)."""
    ordered = sorted(rows, key=lambda row: row.personality_id is None)
    return next((row.fresh for row in ordered if row.fresh is not None), False)


def fresh_setting(
    user_id: str | BindParameter[str], personality_id: int | BindParameter[int]
) -> ScalarSelect[bool | None]:
    """Fresh mode as SQL (`fresh_mode`, read in another statement): NULL when never set. The ids may be
    parameters, for a statement built once."""
    return (
        select(UserSettings.fresh)
        .where(
            UserSettings.user_id == user_id,
            or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality_id),
            UserSettings.fresh.is_not(None),
        )
        .order_by(UserSettings.personality_id.is_(None))
        .limit(1)
        .scalar_subquery()
    )


Scoped = TypeVar("Scoped", UserSettings, Persona)


async def upsert_scoped(
    session: AsyncSession,
    model: type[Scoped],
    user_id: str,
    personality_id: int | None,
    values: dict[str, Any],
) -> Scoped:
    """Write `values` into the user's row of a table with one global row (personality None) and one per
    personality (a partial unique index each), created if new; the row as stored."""
    statement = insert(model).values(user_id=user_id, personality_id=personality_id, **values)
    columns = ["user_id"] if personality_id is None else ["user_id", "personality_id"]
    where = text("personality_id IS NULL" if personality_id is None else "personality_id IS NOT NULL")
    updates: dict[str, Any] = dict(values) or {"user_id": statement.excluded.user_id}
    upsert = statement.on_conflict_do_update(index_elements=columns, index_where=where, set_=updates)
    row_id = await session.scalar(upsert.returning(model.id))
    row = await session.get(model, row_id, populate_existing=True)
    assert row is not None
    return row


class UserSettingsService:
    """Reads and writes a user's settings rows: the global one (personality None) or one personality's."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def for_personality(self, user_id: str, personality_id: int) -> Sequence[UserSettings]:
        """The rows that apply to this user and personality: the global one and the specific one."""
        async with self._sessionmaker() as session:
            return (
                await session.scalars(
                    select(UserSettings).where(
                        UserSettings.user_id == user_id,
                        or_(
                            UserSettings.personality_id.is_(None),
                            UserSettings.personality_id == personality_id,
                        ),
                    )
                )
            ).all()

    async def get(self, user_id: str, personality_id: int | None = None) -> UserSettings | None:
        """The user's row for that scope, None when they never set anything there."""
        async with self._sessionmaker() as session:
            scope = (
                UserSettings.personality_id.is_(None)
                if personality_id is None
                else UserSettings.personality_id == personality_id
            )
            return await session.scalar(select(UserSettings).where(UserSettings.user_id == user_id, scope))

    async def update(
        self,
        user_id: str,
        personality_id: int | None = None,
        *,
        memory_enabled: bool | None = _UNSET,
        summarization: SummarizationPreference | str | None = None,
        allow_dm_recall_in_guilds: bool | None = None,
        fresh: bool | None = _UNSET,
    ) -> UserSettings:
        """Upsert the user's row for that scope, changing only what was given (None memory or fresh =
        inherit)."""
        values: dict[str, Any] = {}
        if fresh is not _UNSET:
            values["fresh"] = fresh
        if memory_enabled is not _UNSET:
            values["memory_enabled"] = memory_enabled
        if summarization is not None:
            values["summarization"] = parse_summarization(str(summarization)).value
        if allow_dm_recall_in_guilds is not None:
            values["allow_dm_recall_in_guilds"] = allow_dm_recall_in_guilds
        async with self._sessionmaker.begin() as session:
            return await upsert_scoped(session, UserSettings, user_id, personality_id, values)

    async def set_fresh(self, user_id: str, on: bool, personality_id: int | None = None) -> bool:
        """Turn fresh mode on or off for the user, with one personality or with all (which ends what
        was set for single ones); whether it is on there now. Off with one personality while it is on
        with all is an exception for that one."""
        async with self._sessionmaker.begin() as session:
            value: bool | None = True if on else None
            row = await upsert_scoped(session, UserSettings, user_id, personality_id, {"fresh": value})
            if personality_id is None:
                await session.execute(
                    update(UserSettings)
                    .where(UserSettings.user_id == user_id, UserSettings.personality_id.is_not(None))
                    .values(fresh=None)
                )
            if on or personality_id is None:
                return bool(row.fresh)
            rows = (
                await session.scalars(
                    select(UserSettings).where(
                        UserSettings.user_id == user_id, UserSettings.personality_id.is_(None)
                    )
                )
            ).all()
            if fresh_mode(rows):
                await upsert_scoped(session, UserSettings, user_id, personality_id, {"fresh": False})
            return False

    async def is_fresh(self, user_id: str, personality_id: int) -> bool:
        """Whether replies of this personality to the user use no long-term memories (`fresh_mode`)."""
        return fresh_mode(await self.for_personality(user_id, personality_id))
