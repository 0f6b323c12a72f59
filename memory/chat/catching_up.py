"""Catching up, the domain's side: what a front door read back from a place's history while it was away,
filed in the log as it was said. A user's message is stored once, by its id; a personality's reply
found there is stored as the answer to the last message asked of it in that place. What is filed is
held from formation while the history is read: a message still worth an answer waits for its own
reply (given through the one turn, `ChatService.answer`), not an earlier one. When the place is done,
each conversation filed is formed (`form`). The front door reads the history and says which line is whose;
this files it, and knows no Discord."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from contextlib import ExitStack

from memory.chat.after_reply import AfterReplyReport
from memory.chat.missed import MissedMessageLog
from memory.chat.turns import ChatReply, ChatRequest, PreparedReply
from memory.formation.pending import AwaitedReplies


class MissedFiling:
    """One place's read-back, filed as it is read (`ChatService.catching_up` opens and closes it)."""

    def __init__(
        self,
        channel_id: str,
        *,
        missed: MissedMessageLog,
        awaited: AwaitedReplies,
        store: Callable[[ChatRequest], Awaitable[PreparedReply]],
        record: Callable[[ChatReply, Sequence[tuple[str, str]]], Awaitable[int]],
        after_reply: Callable[[int], Awaitable[AfterReplyReport]],
    ) -> None:
        self.channel_id = channel_id
        self._missed = missed
        self._awaited = awaited
        self._store = store
        self._record = record
        self._after_reply = after_reply
        self._held = ExitStack()
        # Personality id -> the last message filed for it here: what a reply found next answers.
        self._asked: dict[int, PreparedReply] = {}
        self._conversations: set[int] = set()

    async def refused(self, message_ids: Collection[str]) -> set[str]:
        """Which of these messages were refused live (the flood limit): never filed, never answered."""
        return await self._missed.refused_among(self.channel_id, message_ids)

    async def message(self, request: ChatRequest) -> None:
        """File a user's message to a personality (stored once, by its id), held from formation."""
        self._held.enter_context(self._awaited.holding([request.message_id]))
        prepared = await self._store(request)
        self._asked[request.personality_id] = prepared
        self._conversations.add(prepared.conversation_id)

    async def reply(self, personality_id: int, message_id: str, text: str) -> str | None:
        """File a personality's reply found in the history as the answer to the last message asked of it
        here (filed in this read, or stored before the bot stopped between sending and storing the
        reply); returns the id of the user it answered, None when nothing here was asked of it."""
        prepared = self._asked.get(personality_id)
        if prepared is None:
            request = await self._missed.last_request(
                personality_id=personality_id, channel_id=self.channel_id
            )
            if request is None:
                return None
            prepared = await self._store(request)  # stored already: nothing changes
            self._asked[personality_id] = prepared
        await self._record(ChatReply(text, ok=True, prepared=prepared), [(message_id, text)])
        return prepared.request.user_id

    def answering(self, message_ids: Iterable[str]) -> None:
        """The history is read: release what was filed but these messages, about to be answered, so that
        an answer takes its author's older lines into its memory."""
        self._held.close()
        self._held.enter_context(self._awaited.holding(message_ids))

    def release(self) -> None:
        self._held.close()

    async def form(self) -> list[str]:
        """Form the memories of every conversation filed here; returns the user messages they hold."""
        remembered: list[str] = []
        for conversation_id in sorted(self._conversations):
            remembered += (await self._after_reply(conversation_id)).remembered_message_ids
        return remembered
