"""Chat turns as tests and benches take them, through the one turn production runs
(ChatService.answer): the request a user's message makes, and a delivery that keeps what it was given,
stores the reply under chosen ids, and can hold a turn once its model has written (to finish replies
in a chosen order)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime

from memory.chat.turns import ChatReply, ChatRequest, ReplyDelivery

_message_ids = itertools.count(10_000)


def chat_request(
    personality_id: int,
    text: str,
    *,
    user_id: str = "1001",
    user_name: str = "Alice",
    guild_id: str | None = "500",
    channel_id: str | None = "600",
    message_id: str | None = None,
    created_at: datetime | None = None,
) -> ChatRequest:
    """A user's message to a personality: Alice's in a guild channel, with a fresh message id, unless
    the arguments say otherwise (`guild_id` None: a DM)."""
    return ChatRequest(
        personality_id=personality_id,
        user_id=user_id,
        user_name=user_name,
        guild_id=guild_id,
        channel_id=channel_id,
        message_id=message_id if message_id is not None else str(next(_message_ids)),
        text=text,
        created_at=created_at,
    )


class ReplyRecorder(ReplyDelivery):
    """Delivers a reply as parts stored under `part_ids` (default: one part, the message's id plus
    ":reply"; several: the text split at its blank lines, one part each). With `release`, the turn
    waits once its model has written (`wrote` is set then) until `release` is set. Keeps the reply,
    its pieces as streamed, and what was remembered."""

    def __init__(self, *part_ids: str, release: asyncio.Event | None = None) -> None:
        self.part_ids = part_ids
        self.release = release
        self.wrote = asyncio.Event()
        self.reply: ChatReply | None = None
        self.pieces: list[str] = []
        self.remembered_ids: list[str] = []

    def writing(self) -> AbstractAsyncContextManager[None]:
        return self._writing()

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        yield
        self.wrote.set()
        if self.release is not None:
            await self.release.wait()

    def on_text(self, piece: str) -> None:
        self.pieces.append(piece)

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        self.reply = reply
        if not reply.ok:
            return []
        if len(self.part_ids) < 2:
            reply_id = self.part_ids[0] if self.part_ids else f"{reply.prepared.request.message_id}:reply"
            return [(reply_id, reply.text)]
        return list(zip(self.part_ids, reply.text.split("\n\n"), strict=True))

    async def remembered(self, message_ids: Sequence[str]) -> None:
        self.remembered_ids.extend(message_ids)
