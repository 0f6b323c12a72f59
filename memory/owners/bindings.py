"""Channel bindings: personalities that answer every message in a channel (or DM) without being named."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models import ChannelBinding, Personality


class BindingService:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def bind(self, *, personality_id: int, channel_id: str, guild_id: str | None, user_id: str) -> bool:
        """Bind; False when it already was (nothing changes)."""
        async with self._sessionmaker.begin() as session:
            created = await session.scalar(
                insert(ChannelBinding)
                .values(
                    personality_id=personality_id,
                    channel_id=channel_id,
                    guild_id=guild_id,
                    created_by=user_id,
                )
                .on_conflict_do_nothing(index_elements=["channel_id", "personality_id"])
                .returning(ChannelBinding.id)
            )
        return created is not None

    async def unbind(self, *, personality_id: int, channel_id: str) -> bool:
        """Unbind; False when it was not bound."""
        async with self._sessionmaker.begin() as session:
            removed = await session.scalar(
                delete(ChannelBinding)
                .where(
                    ChannelBinding.personality_id == personality_id, ChannelBinding.channel_id == channel_id
                )
                .returning(ChannelBinding.id)
            )
        return removed is not None

    async def bound_personalities(self, channel_ids: Sequence[str]) -> list[Personality]:
        """Personalities bound to any of these channels (a thread and its parent), oldest binding first."""
        if not channel_ids:
            return []
        async with self._sessionmaker() as session:
            rows = await session.scalars(
                select(Personality)
                .join(ChannelBinding, ChannelBinding.personality_id == Personality.id)
                .where(ChannelBinding.channel_id.in_(list(channel_ids)))
                .order_by(ChannelBinding.id)
            )
            seen: dict[int, Personality] = {}
            for personality in rows:
                seen.setdefault(personality.id, personality)
            return list(seen.values())
