"""Editing the last message (the terminal's /edit): its text changed in the log, then answered again
in place of its reply, with the 🔄's checks (memory.chat.regenerate) and its memories unformed there."""

from __future__ import annotations

import dataclasses

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.turns import ChatRequest, count_with
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.types import ModelConfig
from models import Message


async def edit_message(
    sessionmaker: async_sessionmaker[AsyncSession],
    conversation_id: int,
    again: ChatRequest,
    text: str,
    *,
    cfg: ModelConfig | None,
) -> ChatRequest:
    """The message of `again` in the conversation (ChatService.request_again's: the user may answer it
    again) with `text` in its place, stored; the request to answer it again."""
    text = strip_chat_template_tokens(text).strip()
    if not text:
        raise InvalidInputError("An edited message needs some text.")
    tokens = count_with(cfg, [{"role": "user", "content": text}])
    async with sessionmaker.begin() as session:
        await session.execute(
            update(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.external_id == again.message_id,
                Message.author_id == again.user_id,
            )
            .values(content=text, token_count=tokens)
        )
    return dataclasses.replace(again, text=text)
