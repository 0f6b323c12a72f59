"""A character's greeting as the first message of a new conversation: its card's `first_mes`, or one of
its `alternate_greetings` at random, stored in the conversation's log as the personality's first
message, so the model sees it in the history as SillyTavern shows it at the top of a new chat.

A conversation is new while its log is empty: a greeting is stored once, as the message
`greeting:<conversation id>` (two greeters at once store one), and never after anyone spoke. It answers
no user message, so it forms no memory of its own (memory.formation.exchanges: an orphan reply); it is
context for the exchanges after it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.errors import NotFoundError
from memory.owners.card_prompt import card_chat, fill_chat_macros
from memory.types import MessageRole
from models import Message, Personality


@dataclass(frozen=True, slots=True)
class Greeting:
    """The greeting stored: what to show, under which name and avatar, in which conversation, under
    which message id."""

    text: str
    display_name: str
    avatar_url: str | None
    conversation_id: int
    message_id: str


class Greetings:
    """Greets new conversations with the personality's card greeting (see the module docstring)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def greet(
        self,
        *,
        personality_id: int,
        guild_id: str | None,
        channel_id: str | None,
        user_id: str,
        user_name: str,
    ) -> Greeting | None:
        """Store the greeting as the first message of the conversation in this venue and return it;
        None when the personality has no greeting or the conversation has begun. `user_name` is what
        the greeting's `{{user}}` says: the user who opened the conversation."""
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker.begin() as session:
            personality = await session.get(Personality, personality_id)
            if personality is None:
                raise NotFoundError(f"No personality with id {personality_id}.")
            chat = card_chat(personality.card, personality.display_name)
            if not chat.greetings:
                return None
            conversation_id = await ensure_conversation(session, personality.id, venue)
            if await session.scalar(select(exists().where(Message.conversation_id == conversation_id))):
                return None
            text = fill_chat_macros(random.choice(chat.greetings), char=chat.char, user=user_name)
            message_id = f"greeting:{conversation_id}"
            greeting = LoggedMessage(
                external_id=message_id,
                author_id=f"personality:{personality.name}",
                author_name=personality.display_name,
                role=MessageRole.ASSISTANT,
                content=text,
                created_at=datetime.now(UTC),
            )
            if not await store_messages(session, conversation_id, [greeting]):
                return None
        return Greeting(
            text=text,
            display_name=personality.display_name,
            avatar_url=personality.avatar_url,
            conversation_id=conversation_id,
            message_id=message_id,
        )
