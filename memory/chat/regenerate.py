"""Regenerate: the personality answers the same message again, and the new answer replaces the old.

Only the latest reply of a conversation can be regenerated, and only by the user it answered. The
steps (`regenerate`): the checks; the same prompt path as the first answer (the stored message, recall
beside it, the prompt within its budget) and the same model call; the caller puts the new text where
the old one was (Discord edits, `put_in_place`); then the reply's rows take the new text (the same
rows, one per part: none is added for the same part) and the memory formed from the old answer is
removed, so the caller's next formation pass (`ChatService.after_reply`) forms the exchange from the
answer that stays. The rolling summary never holds a reply that can still be regenerated
(memory.chat.rolling, `settled_only`); a summary made before that rule is checked for all the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.turns import (
    NO_CHAT_MODEL,
    ChatModelMissingError,
    ChatReply,
    ChatRequest,
    PreparedReply,
    reply_messages,
)
from memory.conversations import store_messages
from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.types import MessageRole
from models import Conversation, Message, Summary

if TYPE_CHECKING:  # the chat service builds this; the memory service pulls in the index
    from memory.chat.service import ChatService
    from memory.service import MemoryService

NOT_YOURS = "Only the person this reply answered can regenerate it."
NOT_LATEST = "Only the latest reply can be regenerated."
GONE = "That reply is no longer in the conversation; there is nothing to regenerate."
SUMMARIZED = "That reply is already part of the conversation's summary; it can no longer be regenerated."
BUSY = "That reply is already being regenerated."

# The new answer, and the old reply's parts (external ids, in order) it replaces; returns the new
# parts as sent, (external id, text) each.
PutInPlace = Callable[[ChatReply, Sequence[str]], Awaitable[Sequence[tuple[str, str]]]]


class NotLatestReplyError(InvalidInputError):
    """A newer reply came after this one in the conversation: this one stays as it is."""

    def __init__(self) -> None:
        super().__init__(NOT_LATEST)


@dataclass(slots=True)
class Regeneration:
    """A reply about to be regenerated: the prompt to answer its message again, and its parts."""

    prepared: PreparedReply
    reply_ids: list[str]


class ReplyRegenerator:
    """Answers a message again in place of its reply (see the module docstring)."""

    def __init__(
        self,
        chat: ChatService,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        memory: MemoryService | None,
    ) -> None:
        self._chat = chat
        self._sessionmaker = sessionmaker
        self._memory = memory
        self._busy: set[tuple[int, str]] = set()  # messages being answered again

    async def regenerate(
        self, *, conversation_id: int, message_id: str, user_id: str, put_in_place: PutInPlace
    ) -> ChatReply:
        """Answer the message (its external id in the conversation) again for `user_id` and replace
        its reply with the answer.

        A reply that is not ok (the model failed) changes nothing: the old answer stays. Raises a
        UserFacingError when this user may not regenerate that reply (see `check`).
        """
        key = (conversation_id, message_id)
        if key in self._busy:
            raise InvalidInputError(BUSY)
        self._busy.add(key)
        try:
            regeneration = await self.prepare(
                conversation_id=conversation_id, message_id=message_id, user_id=user_id
            )
            reply = await self._chat.generate(regeneration.prepared)
            if not reply.ok:
                return reply
            # A newer reply may have come in while the model wrote: it would be the latest now.
            await self.check(conversation_id=conversation_id, message_id=message_id, user_id=user_id)
            parts = await put_in_place(reply, regeneration.reply_ids)
            await self.replace(regeneration, reply, parts)
            return reply
        finally:
            self._busy.discard(key)

    async def check(self, *, conversation_id: int, message_id: str, user_id: str) -> None:
        """Refused (a UserFacingError) when the message or its reply is gone, when `user_id` is not the
        user who was answered, when a newer reply exists in the conversation (NotLatestReplyError), or
        when the reply is already in the conversation's summary."""
        async with self._sessionmaker() as session:
            await _check(session, conversation_id, message_id, user_id)

    async def prepare(self, *, conversation_id: int, message_id: str, user_id: str) -> Regeneration:
        """The checks, then the prompt to answer the message again, built as for its first answer."""
        async with self._sessionmaker() as session:
            message, replies = await _check(session, conversation_id, message_id, user_id)
            conversation = await session.get(Conversation, message.conversation_id)
        assert conversation is not None  # messages go with their conversation
        request = ChatRequest(
            personality_id=conversation.personality_id,
            user_id=message.author_id,
            user_name=message.author_name or "User",
            guild_id=conversation.guild_id,
            channel_id=conversation.channel_id,
            message_id=message.external_id,
            text=message.content,
            created_at=message.created_at,
        )
        personality = await self._chat.load_personality(conversation.personality_id)
        cfg = self._chat.models.chat(personality)
        if cfg is None:
            raise ChatModelMissingError(NO_CHAT_MODEL)
        prepared = PreparedReply(request, personality, conversation.id, cfg)
        # The same recall and prompt as the first answer: the history ends at the message answered.
        recall = self._chat.start_recall(request)
        try:
            prepared.context = await self._chat.build_prompt(prepared, recall)
        finally:
            if recall is not None and not recall.done():
                recall.cancel()
        return Regeneration(prepared, [r.external_id for r in replies])

    async def replace(
        self, regeneration: Regeneration, reply: ChatReply, parts: Sequence[tuple[str, str]]
    ) -> None:
        """Store the new answer in the old reply's rows and forget the memory formed from the old one.

        A part sent in place of an old one (same external id) keeps its row, with the new text; parts
        the new answer no longer needs are removed, and parts it needs beyond the old ones are added.
        """
        prepared = regeneration.prepared
        conversation_id = prepared.conversation_id
        new = reply_messages(prepared, parts, created_at=datetime.now(UTC))
        old = set(regeneration.reply_ids)
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
        if self._memory is not None:
            # After the rows hold the new text: a formation pass from now on reads only the new answer.
            await self._memory.unform(
                conversation_id=conversation_id,
                external_ids=[prepared.request.message_id, *regeneration.reply_ids],
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
