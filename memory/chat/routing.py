"""Which personality a message addresses: the decision over names, bindings and reply targets, and
the directory that reads them (every personality's names, cached; a channel's bindings; whose reply
a message answers).

The directory looks at each message in every channel, so the names are cached. A personality change
made through this process (PersonalityService's `on_change`) empties the cache at once; the short
expiry only covers changes made by another process (the command line).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.owners.bindings import BindingService
from memory.types import MessageRole
from models import Conversation, Message, Personality

NAMES_CACHE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Addressee:
    """A personality as routing sees it: its id and the names a user may call it by."""

    id: int
    name: str
    display_name: str

    @property
    def aliases(self) -> tuple[str, ...]:
        names = {self.name.casefold(), self.display_name.casefold()}
        return tuple(sorted((n for n in names if n), key=len, reverse=True))

    @classmethod
    def of(cls, personality: Personality) -> Addressee:
        return cls(id=personality.id, name=personality.name, display_name=personality.display_name)


class RouteReason(StrEnum):
    NAMED = "named"
    REPLY = "reply"
    BOUND = "bound"


@dataclass(frozen=True, slots=True)
class Route:
    personality: Addressee
    reason: RouteReason
    text: str  # the message with a leading "Name," address removed


def _name_pattern(alias: str) -> str:
    # Names may contain spaces or dashes; a name must not run into a longer word ("Lilithian").
    return re.escape(alias).replace(r"\ ", r"\s+")


def find_named(text: str, personalities: Sequence[Addressee]) -> tuple[Addressee, str] | None:
    """The personality named first in `text` (`@Name` anywhere, `Name,` or `Name:` at the start).

    Returns it with the text left once a leading address is removed.
    """
    stripped = text.strip()
    best: tuple[int, Addressee, str] | None = None
    for personality in personalities:
        for alias in personality.aliases:
            pattern = _name_pattern(alias)
            lead = re.match(rf"(?:@{pattern}(?![\w-])|{pattern}(?![\w-])\s*[,:])\s*", stripped, re.I)
            if lead is not None:
                position, rest = 0, stripped[lead.end() :].lstrip(" ,:")
            else:
                at = re.search(rf"(?<![\w@])@{pattern}(?![\w-])", stripped, re.IGNORECASE)
                if at is None:
                    continue
                position, rest = at.start(), stripped
            if best is None or position < best[0]:
                best = (position, personality, rest or stripped)
    return None if best is None else (best[1], best[2])


def route_message(
    text: str,
    *,
    personalities: Sequence[Addressee],
    bound: Sequence[Addressee] = (),
    reply_to: Addressee | None = None,
) -> Route | None:
    """The personality a message addresses, or None.

    A name wins over everything (several personalities may share a channel); then the author of the
    message being replied to; then the channel's binding (the oldest, when several are bound).
    """
    named = find_named(text, personalities)
    if named is not None:
        return Route(named[0], RouteReason.NAMED, named[1])
    if reply_to is not None:
        return Route(reply_to, RouteReason.REPLY, text.strip())
    if bound:
        return Route(bound[0], RouteReason.BOUND, text.strip())
    return None


class RoutingDirectory:
    """Who can be addressed, read from the database: names (cached), bindings and reply authors."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], *, cache_seconds: float = NAMES_CACHE_SECONDS
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bindings = BindingService(sessionmaker)
        self.cache_seconds = cache_seconds
        self._cached: tuple[float, list[Addressee]] | None = None
        self._generation = 0  # bumped by every invalidation

    def invalidate(self) -> None:
        """Forget the cached names: a personality was created, renamed, changed or deleted."""
        self._cached = None
        self._generation += 1

    async def addressees(self) -> list[Addressee]:
        """Every personality's names, oldest first."""
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.cache_seconds:
            return self._cached[1]
        generation = self._generation
        async with self._sessionmaker() as session:
            rows = (await session.scalars(select(Personality).order_by(Personality.id))).all()
        found = [Addressee.of(p) for p in rows]
        # Kept only if nothing changed while we read: a read from before a change must not be cached.
        if generation == self._generation:
            self._cached = (now, found)
        return found

    async def bound(self, channel_ids: Sequence[str]) -> list[Addressee]:
        """Personalities bound to any of these channels (a thread and its parent), oldest binding first."""
        return [Addressee.of(p) for p in await self._bindings.bound_personalities(channel_ids)]

    async def reply_author(self, channel_id: str, message_id: str) -> Addressee | None:
        """The personality whose reply has this message id in this channel, if any."""
        async with self._sessionmaker() as session:
            personality_id = await session.scalar(
                select(Conversation.personality_id)
                .join(Message, Message.conversation_id == Conversation.id)
                .where(
                    Conversation.channel_id == channel_id,
                    Message.external_id == message_id,
                    Message.role == MessageRole.ASSISTANT.value,
                )
                .limit(1)
            )
        if personality_id is None:
            return None
        return next((a for a in await self.addressees() if a.id == personality_id), None)

    async def route(
        self, text: str, *, channel_ids: Sequence[str], reply_to_message_id: str | None = None
    ) -> Route | None:
        """Which personality this message addresses (see `route_message`), reading only what it needs."""
        personalities = await self.addressees()
        if not personalities:
            return None
        reply_to = None
        if reply_to_message_id is not None and channel_ids:
            reply_to = await self.reply_author(channel_ids[0], reply_to_message_id)
        if find_named(text, personalities) is not None or reply_to is not None:
            return route_message(text, personalities=personalities, reply_to=reply_to)
        return route_message(text, personalities=personalities, bound=await self.bound(channel_ids))
