"""The chat turn: `ChatService.answer` stores a message, recalls, builds the prompt within its budget,
calls the personality's model, hands the reply to the caller's `ReplyDelivery`, records it, releases
the message for formation and forms its memories. Every front door answers through it; knows no
Discord. The turn's types are memory.chat.turns (imported from here by callers)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.chat.after_reply import AfterReplyReport, AfterReplyWork
from memory.chat.catching_up import MissedFiling
from memory.chat.generating import generate_reply
from memory.chat.missed import MissedMessageLog, MissedPlace, deserves_answer
from memory.chat.prompt import BuiltContext, ContextBudget
from memory.chat.regenerate import NotLatestReplyError, ReplyRegenerator
from memory.chat.reply_prompt import build_reply_prompt
from memory.chat.rolling import RollingSummarizer
from memory.chat.routing import Addressee, Route, RoutingDirectory
from memory.chat.turns import (
    CUT_REPLY,
    MISCONFIGURED_REPLY,
    NO_CHAT_MODEL,
    REPLY_CUT_NOTE,
    UNAVAILABLE_REPLY,
    ChatModelMissingError,
    ChatReply,
    ChatRequest,
    ChatTurn,
    PreparedReply,
    ReplyDelivery,
    count_with,
    reply_messages,
)
from memory.conversations import (
    LoggedMessage,
    Venue,
    conversation_title,
    ensure_conversation,
    set_conversation_aside,
    store_messages,
)
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.pending import AwaitedReplies
from memory.formation.reset import reset_conversation as reset_stored_conversation
from memory.llm import LLMClient
from memory.owners.model_configs import ModelConfigResolver
from memory.types import MessageRole
from models import Personality

if TYPE_CHECKING:  # the memory service pulls in the vector index and embedder
    from memory.service import MemoryService, RecalledMemory

__all__ = [
    "CUT_REPLY",
    "MISCONFIGURED_REPLY",
    "NO_CHAT_MODEL",
    "REPLY_CUT_NOTE",
    "UNAVAILABLE_REPLY",
    "Addressee",
    "AfterReplyReport",
    "AwaitedReplies",
    "ChatModelMissingError",
    "ChatReply",
    "ChatRequest",
    "ChatService",
    "ChatTurn",
    "MissedMessageLog",
    "MissedPlace",
    "NotLatestReplyError",
    "PreparedReply",
    "ReplyDelivery",
    "Route",
    "deserves_answer",
]

log = logging.getLogger(__name__)

# What `warm_up` recalls for: a question of several words, which recall reads all the way.
WARM_UP_TEXT = "What do you remember about my garden and my dog?"
# Without a model (nothing to answer with) the prompt is not built; this sizes nothing else.
NO_MODEL_CONTEXT_WINDOW = 8192


class ChatService:
    """Answers messages as personalities, within a token budget, remembering through MemoryService."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        llm: LLMClient,
        models: ModelConfigResolver,
        memory: MemoryService,
        rolling: RollingSummarizer,
        awaited: AwaitedReplies,
        context_share: float = 0.75,
        memory_context_share: float = 0.15,
        persona_context_share: float = 0.1,
        lore_context_share: float = 0.15,
        lore_scan_depth: int = 2,
        recall_limit: int = 5,
        reply_max_chars: int = 6000,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._llm = llm
        self._memory = memory
        self._rolling = rolling
        self._models = models
        self._routing = RoutingDirectory(sessionmaker)
        self.context_share = context_share
        self.memory_context_share = memory_context_share
        self.persona_context_share = persona_context_share
        self.lore_context_share = lore_context_share
        self.lore_scan_depth = lore_scan_depth  # messages a lorebook's keys are looked for in, by default
        self.recall_limit = recall_limit
        self.reply_max_chars = reply_max_chars  # what one reply may post, whatever the model sends
        self._after_reply = AfterReplyWork(sessionmaker, models=models, memory=memory, rolling=rolling)
        # Messages being answered: formation leaves them for their own reply (see AwaitedReplies).
        self._awaited = awaited
        self._regenerator = ReplyRegenerator(sessionmaker, memory=memory)
        self._missed = MissedMessageLog(sessionmaker)

    async def route(
        self, text: str, *, channel_ids: Sequence[str], reply_to_message_id: str | None = None
    ) -> Route | None:
        """Which personality this message addresses, or None (see memory.chat.routing)."""
        return await self._routing.route(
            text, channel_ids=channel_ids, reply_to_message_id=reply_to_message_id
        )

    # ------------------------------------------------------------------------ routing, catching up

    async def addressees(self) -> list[Addressee]:
        """Every personality a message can address, with the names it answers to."""
        return await self._routing.addressees()

    def invalidate_routing(self) -> None:
        """Read the personalities again on the next route (one was created, renamed or deleted)."""
        self._routing.invalidate()

    async def refuse(self, request: ChatRequest) -> bool:
        """Store a message refused live (the flood limit) as refused (memory.chat.missed)."""
        return await self._missed.refuse(request)

    async def places_to_read(
        self, guild_channels: Mapping[str, Collection[str]] | None = None
    ) -> list[MissedPlace]:
        """Where to read back what was said while away, and from which message on (memory.chat.missed)."""
        return await self._missed.places_to_read(guild_channels)

    async def remembered_places(self, message_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(channel id, message id) of these remembered user messages, wherever they were said."""
        return await self._missed.remembered_places(message_ids)

    @asynccontextmanager
    async def catching_up(self, channel_id: str) -> AsyncIterator[MissedFiling]:
        """File what is read back from one place's history (memory.chat.catching_up), held from
        formation until the block ends; then `filing.form()` forms what was filed."""
        filing = MissedFiling(
            channel_id,
            missed=self._missed,
            awaited=self._awaited,
            store=self._store,
            record=self._record_reply,
            after_reply=self.after_reply,
        )
        try:
            yield filing
        finally:
            filing.release()

    # ------------------------------------------------------------------------ the turn

    async def answer(self, request: ChatRequest, delivery: ReplyDelivery) -> ChatTurn:
        """One turn: store the message, recall and build the prompt, generate, deliver, record the
        reply, release the message, form memories. A model failure is delivered as a notice and stores
        nothing more; the message then joins its author's next answered exchange. With
        `request.replaces`, the answer takes the place of that reply (memory.chat.regenerate)."""
        again = request.replaces
        guard = self._regenerator.answering_again(request) if again else nullcontext()
        # Held from before it is stored until its reply is recorded, or the turn ends any other way.
        with guard, self._awaited.holding([request.message_id]):
            prepared = await self._prepare(request)
            async with delivery.writing():
                reply = await generate_reply(
                    self._llm, prepared, delivery.on_text, max_chars=self.reply_max_chars
                )
            if reply.ok and again:  # a newer reply may have come in while the model wrote
                await self._regenerator.check(
                    conversation_id=prepared.conversation_id,
                    message_id=request.message_id,
                    user_id=request.user_id,
                )
            parts = list(await delivery.deliver(reply))
            if not reply.ok or not parts:
                return ChatTurn(reply)
            if again:
                await self._regenerator.replace(prepared, parts)
            else:
                await self._record_reply(reply, parts)
            if prepared.memories or again:  # a new answer's receipt replaces the old one's
                await self._record_receipt(prepared)
        await delivery.recorded()
        after = await self.after_reply(prepared.conversation_id)
        try:
            await delivery.remembered(after.remembered_message_ids)
        except Exception:  # the 📝 is a courtesy: the reply and the memory are in place already
            log.exception("Marking the messages remembered after a reply failed")
        return ChatTurn(reply, parts, after)

    async def request_again(self, *, conversation_id: int, message_id: str, user_id: str) -> ChatRequest:
        """The message as a request to answer again in place of its reply (🔄), for `answer`; refused
        with a UserFacingError when `user_id` may not (NotLatestReplyError: a newer reply exists)."""
        return await self._regenerator.request_again(
            conversation_id=conversation_id, message_id=message_id, user_id=user_id
        )

    async def warm_up(
        self,
        *,
        personality_id: int,
        user_id: str,
        user_name: str,
        guild_id: str | None,
        channel_id: str | None,
    ) -> None:
        """A reply's preparation made once before the first message comes, and undone: its statements
        compiled, the pool's connections opened, the query embedded and the index searched, so that
        the first reply after a start is as fast as the next. Nothing is kept; a failure is logged."""
        request = ChatRequest(
            personality_id, user_id, user_name, guild_id, channel_id, message_id="warm-up", text=WARM_UP_TEXT
        )
        # Twice: the first recall keeps the participants' names, which a reply's recall then finds kept.
        if (first := self._start_recall(request)) is not None:
            await first
        recall = self._start_recall(request)
        try:
            async with self._sessionmaker() as session, session.begin() as transaction:
                prepared = await self._store_user_message(session, request)
                if prepared.cfg is not None:
                    await self._build_prompt(prepared, recall)
                    recall = None
                await transaction.rollback()  # the message stored is taken back
        except Exception:
            log.warning("Warming up the reply path failed; the first reply will do it", exc_info=True)
        finally:
            if recall is not None:
                recall.cancel()

    # ------------------------------------------------------------------------ before the reply

    async def _prepare(self, request: ChatRequest) -> PreparedReply:
        """Store the user's message, then recall and build the prompt to answer it within its budget."""
        # Recall (query embedding + search) needs nothing stored: it runs beside the storing.
        recall = self._start_recall(request)
        try:
            prepared = await self._store(request)
            if prepared.cfg is not None:
                prepared.context = await self._build_prompt(prepared, recall)
                recall = None
            return prepared
        finally:
            if recall is not None:
                recall.cancel()

    async def _store(self, request: ChatRequest) -> PreparedReply:
        """Put the message in its conversation's log (once, by its id), counted with the chat model."""
        async with self._sessionmaker.begin() as session:
            return await self._store_user_message(session, request)

    async def _store_user_message(self, session: AsyncSession, request: ChatRequest) -> PreparedReply:
        text = strip_chat_template_tokens(request.text)
        venue = Venue(guild_id=request.guild_id, channel_id=request.channel_id, user_id=request.user_id)
        personality = await _with_chat_model(session, request.personality_id)
        if personality is None:
            raise InvalidInputError(f"No personality with id {request.personality_id}.")
        cfg = self._models.chat(personality)
        conversation_id = await ensure_conversation(session, personality.id, venue)
        message = LoggedMessage(
            external_id=request.message_id,
            author_id=request.user_id,
            author_name=request.user_name,
            role=MessageRole.USER,
            content=text,
            created_at=request.created_at or datetime.now(UTC),
            token_count=count_with(cfg, [{"role": "user", "content": text}]) if text else 0,
        )
        await store_messages(session, conversation_id, [message])
        return PreparedReply(request, personality, conversation_id, cfg)

    def _start_recall(self, request: ChatRequest) -> asyncio.Task[list[RecalledMemory]] | None:
        """The user's memories that match the message, recalled in the background (None: no recall)."""
        if self.recall_limit <= 0 or self.memory_context_share <= 0:
            return None
        return asyncio.create_task(self._recall(request))

    async def _recall(self, request: ChatRequest) -> list[RecalledMemory]:
        try:
            recalled = await self._memory.recall(
                personality_id=request.personality_id,
                user_id=request.user_id,
                query=request.text,
                guild_id=request.guild_id,
                limit=self.recall_limit,
                for_reply=True,
            )
        except Exception:
            # A broken index must not cost the reply: answer without memories.
            log.exception("Recall failed for personality %s", request.personality_id)
            return []
        # A memory of this very message's exchange (its reply being regenerated) is not recalled into it.
        return [m for m in recalled if request.message_id not in m.sources_with_context]

    async def _build_prompt(
        self, prepared: PreparedReply, recall: asyncio.Task[list[RecalledMemory]] | None = None
    ) -> BuiltContext:
        """The prompt for the stored message within the chat model's budget (memory.chat.reply_prompt)."""
        cfg = prepared.cfg
        window = self._llm.context_window(cfg) if cfg else NO_MODEL_CONTEXT_WINDOW
        budget = ContextBudget.for_window(
            window,
            share=self.context_share,
            memory_share=self.memory_context_share,
            persona_share=self.persona_context_share,
            lore_share=self.lore_context_share,
            reply_tokens=cfg.max_tokens if cfg else 0,
        )
        return await build_reply_prompt(
            self._sessionmaker, prepared, recall, budget=budget, lore_scan_depth=self.lore_scan_depth
        )

    async def _record_reply(self, reply: ChatReply, parts: Sequence[tuple[str, str]]) -> int:
        """Store the sent reply: one assistant message per (external id, text) part; returns how many new.
        Each part records the message it answers: memories follow that link, whatever order replies end in.
        """
        prepared = reply.prepared
        messages = reply_messages(prepared, parts, created_at=datetime.now(UTC))
        async with self._sessionmaker.begin() as session:
            return await store_messages(session, prepared.conversation_id, messages)

    async def _record_receipt(self, prepared: PreparedReply) -> None:
        """Keep which memories the reply's prompt held, for its 🧠 (memory.recall.receipts)."""
        try:
            await self._memory.record_reply_memories(
                conversation_id=prepared.conversation_id,
                message_id=prepared.request.message_id,
                memories=prepared.memories,
            )
        except Exception:  # a missing receipt must not cost the reply its memory formation
            log.exception("Recording the memories of the reply to %s failed", prepared.request.message_id)

    # ------------------------------------------------------------------------ after the reply

    async def after_reply(self, conversation_id: int) -> AfterReplyReport:
        """Form the new exchanges' memories and update the rolling summary if due; failures are logged
        and left for the next pass."""
        return await self._after_reply.run(conversation_id)

    async def reset_conversation(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> int:
        """Reset the conversation: summary, title, the user's pending memories (memory.formation.reset)."""
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker.begin() as session:
            return await reset_stored_conversation(session, personality_id, venue)

    async def start_new_conversation(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> int | None:
        """Open a new conversation here, with no earlier message in its context: the current one is set
        aside, its log and memories kept, and its id returned (None when there was none)."""
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker.begin() as session:
            return await set_conversation_aside(session, personality_id, venue)

    async def conversation_title(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> str | None:
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker() as session:
            return await conversation_title(session, personality_id, venue)


async def _with_chat_model(session: AsyncSession, personality_id: int) -> Personality | None:
    return await session.scalar(
        select(Personality)
        .where(Personality.id == personality_id)
        .options(selectinload(Personality.chat_llm_config))
    )
