"""What the bot missed while away, as the message log and the bindings tell: the places to read again
and from which message on, which missed message still deserves an answer, where remembered messages
were said. Snowflakes (live ids) mark a place as read; ids made up by imports never do. A message the
bot refused is stored as refused (`refuse`): never answered, and read back as refused, not as missed.
It does not mark its place as read: the bot acted on it alone, and a message said before it that the
bot never saw (a gateway gap, the bot stopped as the refusal was stored) is still read back (issue 33)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Numeric, case, cast, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.refused import REFUSED, not_refused
from memory.chat.turns import ChatRequest
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.formation.cleaning import strip_chat_template_tokens
from memory.types import MessageRole
from models import ChannelBinding, Conversation, Message

_SNOWFLAKE = r"^[0-9]{1,20}$"


@dataclass(frozen=True, slots=True)
class MissedPlace:
    """A channel to read again: after the newest message stored there, or, with nothing stored yet,
    since it was bound."""

    channel_id: str
    after_message_id: int | None
    since: datetime | None


def _newest_snowflake(*, refused: bool = False) -> ColumnElement[Any]:
    """The newest snowflake of the messages acted on (the oldest of those refused, with `refused`)."""
    # The cast only sees ids made of digits; anything else (imported ids) counts as nothing.
    kind = Message.memory_excluded.is_not_distinct_from(REFUSED) if refused else not_refused()
    snowflake = case(
        (Message.external_id.regexp_match(_SNOWFLAKE) & kind, cast(Message.external_id, Numeric(20, 0)))
    )
    return func.min(snowflake) if refused else func.max(snowflake)


def deserves_answer(created_at: datetime, *, now: datetime, window: timedelta) -> bool:
    """Whether a missed message is recent enough to answer now; an older one is remembered, not answered
    late (an answer an hour on, to a conversation that moved on, reads as a glitch)."""
    return now - created_at <= window


class MissedMessageLog:
    """What the message log and the bindings say about catching up."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def places_to_read(
        self, guild_channels: Mapping[str, Collection[str]] | None = None
    ) -> list[MissedPlace]:
        """Every bound channel and every DM channel with a conversation, with where to read on from; and
        each channel of `guild_channels` (guild id -> the channels the bot can read there), after its
        newest stored message, or with none stored there, after the newest stored in its guild: what
        was said to a personality by name in a channel bound to nobody is read back too. A guild with
        nothing stored gives nothing (no word of it tells when the bot went away)."""
        guild_channels = guild_channels or {}
        async with self._sessionmaker() as session:
            bound = dict(
                (
                    await session.execute(
                        select(ChannelBinding.channel_id, func.max(ChannelBinding.created_at)).group_by(
                            ChannelBinding.channel_id
                        )
                    )
                ).all()
            )
            dm_channels = await session.scalars(
                select(Conversation.channel_id).where(
                    Conversation.is_dm.is_(True), Conversation.channel_id.regexp_match(_SNOWFLAKE)
                )
            )
            seen = {c for channels in guild_channels.values() for c in channels}
            channels = sorted({*bound, *(c for c in dm_channels if c is not None), *seen})
            newest: dict[str, object] = {}
            for channel_id, acted, first_refused in await session.execute(
                select(Conversation.channel_id, _newest_snowflake(), _newest_snowflake(refused=True))
                .join(Message, Message.conversation_id == Conversation.id)
                .where(Conversation.channel_id.in_(channels))
                .group_by(Conversation.channel_id)
            ):
                # Only refused messages there: read from just before the first (it is read as refused).
                only_refused = acted is None and first_refused is not None
                newest[channel_id] = first_refused - 1 if only_refused else acted
            guild_newest: dict[str, object] = dict(
                (
                    await session.execute(
                        select(Conversation.guild_id, _newest_snowflake())
                        .join(Message, Message.conversation_id == Conversation.id)
                        .where(Conversation.guild_id.in_(list(guild_channels)))
                        .group_by(Conversation.guild_id)
                    )
                ).all()
            )
        guild_of = {c: guild for guild, channels in guild_channels.items() for c in channels}
        places = []
        for channel_id in channels:
            after = newest.get(channel_id)
            if after is None and channel_id not in bound:
                # A channel where nothing is stored: read from the guild's last stored word, if any (a DM
                # conversation holding only imported messages gives nothing to read on from).
                after = guild_newest.get(guild_of[channel_id]) if channel_id in guild_of else None
                if after is None:
                    continue
            places.append(
                MissedPlace(
                    channel_id=channel_id,
                    after_message_id=int(str(after)) if after is not None else None,
                    since=None if after is not None else bound[channel_id],
                )
            )
        return places

    async def refuse(self, request: ChatRequest) -> bool:
        """Store a message the bot refused (over the flood limit) as refused: read back by no catch-up,
        part of no memory (see memory.chat.refused), in one transaction; False when it was stored already."""
        now = datetime.now(UTC)
        venue = Venue(guild_id=request.guild_id, channel_id=request.channel_id, user_id=request.user_id)
        message = LoggedMessage(
            external_id=request.message_id,
            author_id=request.user_id,
            author_name=request.user_name,
            role=MessageRole.USER,
            content=strip_chat_template_tokens(request.text),
            created_at=request.created_at or now,
        )
        async with self._sessionmaker.begin() as session:
            conversation_id = await ensure_conversation(session, request.personality_id, venue)
            if not await store_messages(session, conversation_id, [message]):
                return False  # a message once accepted is not refused after the fact
            # Processed as well as excluded: nothing is pending for it, no pass looks at it again.
            await session.execute(
                update(Message)
                .where(Message.conversation_id == conversation_id, Message.external_id == message.external_id)
                .values(memory_excluded=REFUSED, memory_processed_at=now)
            )
        return True

    async def refused_among(self, channel_id: str, message_ids: Collection[str]) -> set[str]:
        """Which of these messages of the channel are stored as refused: catch-up passes them over."""
        if not message_ids:
            return set()
        async with self._sessionmaker() as session:
            found = await session.scalars(
                select(Message.external_id)
                .join(Conversation, Message.conversation_id == Conversation.id)
                .where(
                    Conversation.channel_id == channel_id,
                    Message.external_id.in_(list(message_ids)),
                    Message.memory_excluded == REFUSED,
                )
            )
            return set(found)

    async def last_request(self, *, personality_id: int, channel_id: str) -> ChatRequest | None:
        """The newest stored user message to this personality in this channel, as the request it was: what
        a reply found in the history answers when the bot stopped between sending and storing it."""
        async with self._sessionmaker() as session:
            row = (
                await session.execute(
                    select(Message, Conversation)
                    .join(Conversation, Message.conversation_id == Conversation.id)
                    .where(
                        Conversation.personality_id == personality_id,
                        Conversation.channel_id == channel_id,
                        Message.role == MessageRole.USER.value,
                        not_refused(),  # never answered: no reply in the history answers it
                    )
                    .order_by(Message.id.desc())
                    .limit(1)
                )
            ).first()
        if row is None:
            return None
        message, conversation = row
        return ChatRequest(
            personality_id=personality_id,
            user_id=message.author_id,
            user_name=message.author_name or message.author_id,
            guild_id=conversation.guild_id,
            channel_id=channel_id,
            message_id=message.external_id,
            text=message.content,
            created_at=message.created_at,
        )

    async def remembered_places(self, external_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(channel id, message id) of remembered user messages, for a pass that spans every conversation.

        Looked up by external id: a Discord snowflake names one message, stored in one conversation.
        """
        ids = sorted({i for i in external_ids if i.isdigit()})
        if not ids:
            return []
        async with self._sessionmaker() as session:
            rows = await session.execute(
                select(Conversation.channel_id, Message.external_id)
                .join(Message, Message.conversation_id == Conversation.id)
                .where(
                    Message.external_id.in_(ids),
                    Message.role == MessageRole.USER.value,
                    Message.memory_processed_at.is_not(None),
                    Conversation.channel_id.is_not(None),
                )
                .order_by(Message.id)
            )
            return [(str(channel_id), external_id) for channel_id, external_id in rows]
