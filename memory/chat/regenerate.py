"""Answering a message again (🔄): who may and when (only the user answered, only the latest reply,
one at a time, never a reply already in the summary), and the reply's rows replaced by the new answer
with the old answer's memory unformed. The turn itself is ChatService.answer's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.turns import ChatRequest, PreparedReply, reply_messages
from memory.conversations import store_messages
from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.types import MessageRole
from models import Conversation, Message, Summary

if TYPE_CHECKING:  # the memory service pulls in the index
    from memory.service import MemoryService

NOT_YOURS = "Only the person this reply answered can regenerate it."
NOT_LATEST = "Only the latest reply can be regenerated."
GONE = "That reply is no longer in the conversation; there is nothing to regenerate."
SUMMARIZED = "That reply is already part of the conversation's summary; it can no longer be regenerated."
BUSY = "That reply is already being regenerated."


class NotLatestReplyError(InvalidInputError):
    """A newer reply came after this one in the conversation: this one stays as it is."""

    def __init__(self) -> None:
        super().__init__(NOT_LATEST)


class ReplyRegenerator:
    """The checks and the rows of answering a message again (see the module docstring)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], *, memory: MemoryService) -> None:
        self._sessionmaker = sessionmaker
        self._memory = memory
        self._busy: set[tuple[int, str | None, str]] = set()  # messages being answered again

    async def request_again(self, *, conversation_id: int, message_id: str, user_id: str) -> ChatRequest:
        """The message (its external id in the conversation) as a request to answer again in place of
        its reply, for `user_id`; a UserFacingError when they may not (see `check`)."""
        async with self._sessionmaker() as session:
            message, replies = await _check(session, conversation_id, message_id, user_id)
            conversation = await session.get(Conversation, message.conversation_id)
        assert conversation is not None  # messages go with their conversation
        return ChatRequest(
            personality_id=conversation.personality_id,
            user_id=message.author_id,
            user_name=message.author_name or "User",
            guild_id=conversation.guild_id,
            channel_id=conversation.channel_id,
            message_id=message.external_id,
            text=message.content,
            created_at=message.created_at,
            replaces=tuple(r.external_id for r in replies),
        )

    async def check(self, *, conversation_id: int, message_id: str, user_id: str) -> None:
        """Refused (a UserFacingError) when the message or its reply is gone, when `user_id` is not the
        user who was answered, when a newer reply exists in the conversation (NotLatestReplyError), or
        when the reply is already in the conversation's summary."""
        async with self._sessionmaker() as session:
            await _check(session, conversation_id, message_id, user_id)

    @contextmanager
    def answering_again(self, request: ChatRequest) -> Iterator[None]:
        """One regeneration of a reply at a time: a second press meanwhile is refused (BUSY)."""
        key = (request.personality_id, request.channel_id, request.message_id)
        if key in self._busy:
            raise InvalidInputError(BUSY)
        self._busy.add(key)
        try:
            yield
        finally:
            self._busy.discard(key)

    async def replace(self, prepared: PreparedReply, parts: Sequence[tuple[str, str]]) -> None:
        """Store the new answer in the old reply's rows and forget the memory formed from the old one.

        A part sent in place of an old one (same external id) keeps its row, with the new text; parts
        the new answer no longer needs are removed, and parts it needs beyond the old ones are added.
        """
        conversation_id = prepared.conversation_id
        new = reply_messages(prepared, parts, created_at=datetime.now(UTC))
        old = set(prepared.request.replaces)
        async with self._sessionmaker.begin() as session:
            for message in new:
                if message.external_id in old:
                    await session.execute(
                        update(Message)
                        .where(
                            Message.conversation_id == conversation_id,
                            Message.external_id == message.external_id,
                        )
                        .values(content=message.content, token_count=message.token_count)
                    )
            await store_messages(session, conversation_id, [m for m in new if m.external_id not in old])
            gone = sorted(old - {m.external_id for m in new})
            if gone:
                await session.execute(
                    delete(Message).where(
                        Message.conversation_id == conversation_id, Message.external_id.in_(gone)
                    )
                )
        # After the rows hold the new text: a formation pass from now on reads only the new answer.
        await self._memory.unform(
            conversation_id=conversation_id,
            external_ids=[prepared.request.message_id, *prepared.request.replaces],
            exclude=False,
        )


async def _check(
    session: AsyncSession, conversation_id: int, message_id: str, user_id: str
) -> tuple[Message, list[Message]]:
    """The user message and its reply's parts, if `user_id` may regenerate that reply now."""
    message = await session.scalar(
        select(Message).where(Message.conversation_id == conversation_id, Message.external_id == message_id)
    )
    if message is None or message.role != MessageRole.USER.value:
        raise NotFoundError(GONE)
    if message.author_id != user_id:
        raise PermissionDeniedError(NOT_YOURS)
    replies = list(
        (
            await session.scalars(
                select(Message)
                .where(
                    Message.conversation_id == message.conversation_id,
                    Message.reply_to_id == message.id,
                    Message.role == MessageRole.ASSISTANT.value,
                )
                .order_by(Message.id)
            )
        ).all()
    )
    if not replies:
        raise NotFoundError(GONE)
    newest = await session.scalar(
        select(func.max(Message.id)).where(
            Message.conversation_id == message.conversation_id,
            Message.role == MessageRole.ASSISTANT.value,
        )
    )
    if newest != replies[-1].id:
        raise NotLatestReplyError()
    summarized = await session.scalar(
        select(func.max(Summary.last_message_id)).where(Summary.conversation_id == message.conversation_id)
    )
    if summarized is not None and summarized >= replies[0].id:
        raise InvalidInputError(SUMMARIZED)
    return message, replies
