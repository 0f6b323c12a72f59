"""Chat turns as the tests make and read them (the request itself: testkit.chat.chat_request): the
turn production runs (ChatService.answer) with the reply stored under chosen ids, and a
conversation's message log as stored."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from bot.runtime import Runtime
from memory.chat.service import ChatRequest, ChatTurn
from models import Message
from testkit.chat import ReplyRecorder
from testkit.llm_server import LLMTestServer


async def stored(runtime: Runtime, conversation_id: int, *, role: str | None = None) -> list[Message]:
    """The conversation's messages (of one role, when given), oldest first."""
    query = select(Message).where(Message.conversation_id == conversation_id)
    if role is not None:
        query = query.where(Message.role == role)
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(query.order_by(Message.id))).all())


async def answer(runtime: Runtime, req: ChatRequest, *part_ids: str) -> ChatTurn:
    """One chat turn, the reply stored as `part_ids` (see ReplyRecorder)."""
    turn: ChatTurn = await runtime.chat.answer(req, ReplyRecorder(*part_ids))
    return turn


def chat_requests(llm_server: LLMTestServer) -> list[dict[str, Any]]:
    """What the chat model was asked (not the summarizer the turn may call), oldest first."""
    return [r for r in llm_server.requests if r.get("model") == "test-chat"]
