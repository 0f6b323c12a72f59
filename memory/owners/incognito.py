"""Incognito: spans of time in which what a user says to one personality (or to all) forms no memory.

A span is a row of `incognito_sessions`, kept after it ends: the message log judges each user message
by the span its own time falls in when it is stored (memory.conversations.store_messages), so what
was said incognito and only read back later (catch-up after downtime) is excluded all the same. A span
ends by itself when its `ends_at` has passed (nothing needs to run then), or when turned off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import incognito_span_covers
from memory.errors import InvalidInputError
from models import IncognitoSession, Personality

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class IncognitoSpan:
    """A span that is on: for one personality (its id and display name), or for all (None)."""

    personality_id: int | None
    personality_name: str | None
    started_at: datetime
    ends_at: datetime | None  # None: until turned off


class IncognitoService:
    """Starts, ends and reads a user's incognito spans; `clock` is what "now" is (tests move it)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], *, clock: Clock = utc_now) -> None:
        self._sessionmaker = sessionmaker
        self._clock = clock

    async def start(
        self,
        user_id: str,
        personality_id: int | None,
        duration: timedelta | None,
        *,
        asked_at: datetime | None = None,
    ) -> IncognitoSpan:
        """Turn incognito on for one personality (None: all) for `duration` (None: until turned off).

        Already on for that scope: its end becomes the new one. `asked_at` is when the user asked, on
        the clock their messages are stamped with (Discord's): the span starts at the earlier of that
        and now, so a message sent after the answer is never stamped before the span's start, however
        the two clocks differ.
        """
        if duration is not None and duration <= timedelta(0):
            raise InvalidInputError("Incognito needs a duration longer than zero.")
        now = self._clock()
        ends_at = now + duration if duration is not None else None
        async with self._sessionmaker.begin() as session:
            span = await session.scalar(
                select(IncognitoSession)
                .where(self._on(user_id, now), _scope(personality_id))
                .order_by(IncognitoSession.id)
                .limit(1)
                .with_for_update()
            )
            if span is None:
                span = IncognitoSession(
                    user_id=user_id,
                    personality_id=personality_id,
                    started_at=min(asked_at, now) if asked_at is not None else now,
                    ends_at=ends_at,
                )
                session.add(span)
            else:
                span.ends_at = ends_at
            name = await session.scalar(
                select(Personality.display_name).where(Personality.id == personality_id)
            )
            return IncognitoSpan(personality_id, name, span.started_at, ends_at)

    async def stop(self, user_id: str, personality_id: int | None) -> int:
        """Turn incognito off now: for one personality, or (None) everywhere, every span the user has
        on; returns how many spans ended. A span for all personalities is not ended by naming one."""
        now = self._clock()
        where = [self._on(user_id, now)]
        if personality_id is not None:
            where.append(IncognitoSession.personality_id == personality_id)
        async with self._sessionmaker.begin() as session:
            ended = await session.scalars(
                update(IncognitoSession).where(*where).values(ended_at=now).returning(IncognitoSession.id)
            )
            return len(ended.all())

    async def active(self, user_id: str, personality_id: int) -> IncognitoSpan | None:
        """The span that keeps what the user says to this personality out of memory now, if any: the
        one that lasts longest, for all personalities first when two end together."""
        spans = await self._spans(
            self._on(user_id, self._clock()),
            or_(IncognitoSession.personality_id.is_(None), IncognitoSession.personality_id == personality_id),
        )
        return spans[0] if spans else None

    async def current(self, user_id: str) -> Sequence[IncognitoSpan]:
        """Every span the user has on now, the longest first."""
        return await self._spans(self._on(user_id, self._clock()))

    def _on(self, user_id: str, now: datetime) -> ColumnElement[bool]:
        return and_(IncognitoSession.user_id == user_id, incognito_span_covers(now))

    async def _spans(self, *where: ColumnElement[bool]) -> list[IncognitoSpan]:
        query = (
            select(IncognitoSession, Personality.display_name)
            .outerjoin(Personality, Personality.id == IncognitoSession.personality_id)
            .where(*where)
            .order_by(
                IncognitoSession.ends_at.desc().nulls_first(),
                IncognitoSession.personality_id.nulls_first(),
                IncognitoSession.id,
            )
        )
        async with self._sessionmaker() as session:
            rows = (await session.execute(query)).all()
        return [IncognitoSpan(s.personality_id, name, s.started_at, s.ends_at) for s, name in rows]


def _scope(personality_id: int | None) -> ColumnElement[bool]:
    if personality_id is None:
        return IncognitoSession.personality_id.is_(None)
    return IncognitoSession.personality_id == personality_id
