"""The chat path: route, store, build the prompt, call the personality's model, store the reply.

Takes plain ids and strings (Discord's cog and the terminal chat both drive it) and knows no Discord.
Memory formation and rolling summaries run after the reply, in `after_reply`, which the caller
schedules off the chat path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.chat.prompt import BuiltContext, ContextBudget, HistoryMessage, build_context
from memory.chat.rolling import RollingSummarizer, SummaryUpdate, summary_text
from memory.chat.routing import Addressee, Route, route_message
from memory.conversations import NewMessage, Venue, clear_rolling_summary, ensure_conversation, store_messages
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.llm import LLMClient, LLMConfigError, LLMUnavailableError
from memory.types import MessageRole, ModelConfig
from models import Conversation, Message, Personality

if TYPE_CHECKING:  # the memory service pulls in the vector index and embedder
    from memory.service import MemoryService

log = logging.getLogger(__name__)

HISTORY_LIMIT = 80
PERSONALITY_CACHE_SECONDS = 30.0
NO_CHAT_MODEL = (
    "No chat model is configured: set CHAT_MODEL to a litellm model string, for example "
    "CHAT_MODEL=ollama/llama3.1 (with CHAT_API_BASE=http://localhost:11434) or "
    "CHAT_MODEL=openai/gpt-4o-mini (with CHAT_API_KEY)."
)
UNAVAILABLE_REPLY = "(I can't answer right now: my language model is unavailable. Please try again later.)"
MISCONFIGURED_REPLY = (
    "(I can't answer: my language model is misconfigured. An admin has been told in the logs.)"
)


class ChatModelMissingError(InvalidInputError):
    """No chat model for this personality or the deployment."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One incoming message addressed to a personality."""

    personality_id: int
    user_id: str
    user_name: str
    guild_id: str | None
    channel_id: str | None
    message_id: str
    text: str
    created_at: datetime | None = None


@dataclass(slots=True)
class PreparedReply:
    """A stored user message and the prompt to answer it."""

    request: ChatRequest
    personality: Personality
    conversation_id: int
    cfg: ModelConfig | None
    context: BuiltContext | None


@dataclass(slots=True)
class ChatReply:
    text: str
    ok: bool  # False: `text` is the error notice, nothing was stored for it
    prepared: PreparedReply
    error: str | None = None


@dataclass(slots=True)
class AfterReplyReport:
    remembered_message_ids: list[str] = field(default_factory=list)
    summary: SummaryUpdate | None = None
    formation_failed: bool = False


class Cooldown:
    """At most `messages` per user within `seconds`; tells once per window that the user is too fast."""

    def __init__(self, messages: int, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.messages = messages
        self.seconds = seconds
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._notified: dict[str, float] = {}

    def hit(self, user_id: str) -> tuple[bool, bool]:
        """(allowed, notify): record a message; notify is True the first time in a window it is refused."""
        now = self._clock()
        times = self._seen.setdefault(user_id, deque())
        while times and now - times[0] >= self.seconds:
            times.popleft()
        if len(times) < self.messages:
            times.append(now)
            return True, False
        last_notice = self._notified.get(user_id)
        notify = last_notice is None or now - last_notice >= self.seconds
        if notify:
            self._notified[user_id] = now
        return False, notify

    def retry_after(self, user_id: str) -> float:
        times = self._seen.get(user_id)
        if not times:
            return 0.0
        return max(0.0, self.seconds - (self._clock() - times[0]))


def as_addressee(personality: Personality) -> Addressee:
    return Addressee(id=personality.id, name=personality.name, display_name=personality.display_name)


class ChatService:
    """Answers messages as personalities, within a token budget, remembering through MemoryService."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        llm: LLMClient,
        memory: MemoryService | None = None,
        rolling: RollingSummarizer | None = None,
        default_chat: ModelConfig | None = None,
        chat_api_base: str | None = None,
        chat_api_key: str | None = None,
        summarizer_default: ModelConfig | None = None,
        context_share: float = 0.75,
        memory_context_share: float = 0.15,
        recall_limit: int = 5,
        llm_timeout: float = 60.0,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._llm = llm
        self._memory = memory
        self._rolling = rolling
        self._default_chat = default_chat
        self._chat_api_base = chat_api_base
        self._chat_api_key = chat_api_key
        self._summarizer_default = summarizer_default
        self.context_share = context_share
        self.memory_context_share = memory_context_share
        self.recall_limit = recall_limit
        self._llm_timeout = llm_timeout
        self._addressees: tuple[float, list[Addressee]] | None = None
        # Recall runs beside the message's database work, which needs a pool: a sessionmaker bound to
        # a single connection (the tests' rolled-back transaction) can serve one session at a time.
        self.overlap_recall = not isinstance(sessionmaker.kw.get("bind"), AsyncConnection)

    @property
    def memory(self) -> MemoryService | None:
        return self._memory

    # ------------------------------------------------------------------------ routing

    async def addressees(self) -> list[Addressee]:
        """Every personality's names, cached briefly: routing looks at each message in every channel."""
        now = time.monotonic()
        if self._addressees is not None and now - self._addressees[0] < PERSONALITY_CACHE_SECONDS:
            return self._addressees[1]
        async with self._sessionmaker() as session:
            rows = (await session.scalars(select(Personality).order_by(Personality.id))).all()
        found = [as_addressee(p) for p in rows]
        self._addressees = (now, found)
        return found

    def forget_cached_personalities(self) -> None:
        self._addressees = None

    async def bound_addressees(self, channel_ids: Sequence[str]) -> list[Addressee]:
        from memory.owners.bindings import BindingService

        return [
            as_addressee(p) for p in await BindingService(self._sessionmaker).bound_personalities(channel_ids)
        ]

    async def reply_target(self, channel_id: str, message_id: str) -> Addressee | None:
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
        self,
        text: str,
        *,
        channel_ids: Sequence[str],
        reply_to_message_id: str | None = None,
    ) -> Route | None:
        """Which personality this message addresses (see memory.chat.routing), or None."""
        personalities = await self.addressees()
        if not personalities:
            return None
        reply_to = None
        if reply_to_message_id is not None and channel_ids:
            reply_to = await self.reply_target(channel_ids[0], reply_to_message_id)
        from memory.chat.routing import find_named

        if find_named(text, personalities) is not None or reply_to is not None:
            return route_message(text, personalities=personalities, reply_to=reply_to)
        bound = await self.bound_addressees(channel_ids)
        return route_message(text, personalities=personalities, bound=bound)

    # ------------------------------------------------------------------------ replying

    def chat_config(self, personality: Personality) -> ModelConfig | None:
        """The personality's LLM config, its model string (deployment endpoint), or the deployment model."""
        if personality.chat_llm_config is not None:
            from memory.service import model_config_from

            return model_config_from(personality.chat_llm_config)
        if personality.chat_model:
            base = self._default_chat
            return ModelConfig(
                model=personality.chat_model,
                api_base=self._chat_api_base,
                api_key=self._chat_api_key,
                temperature=base.temperature if base else 0.8,
                max_tokens=base.max_tokens if base else 512,
                timeout=self._llm_timeout,
            )
        return self._default_chat

    async def load_personality(self, personality_id: int) -> Personality:
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .where(Personality.id == personality_id)
                .options(selectinload(Personality.chat_llm_config))
            )
        if personality is None:
            raise InvalidInputError(f"No personality with id {personality_id}.")
        return personality

    def count_tokens(self, cfg: ModelConfig | None, messages: list[dict[str, Any]]) -> int:
        return self._llm.count_tokens(cfg.model if cfg else "gpt-4o", messages=messages)

    async def prepare(self, request: ChatRequest) -> PreparedReply:
        """Store the user's message, then build the prompt to answer it within the token budget."""
        # Recall (query embedding + search) needs nothing stored: it overlaps the database work below.
        recall = self._start_recall(request) if self.overlap_recall else None
        try:
            text = strip_chat_template_tokens(request.text)
            venue = Venue(guild_id=request.guild_id, channel_id=request.channel_id, user_id=request.user_id)
            async with self._sessionmaker.begin() as session:
                personality = await session.scalar(
                    select(Personality)
                    .where(Personality.id == request.personality_id)
                    .options(selectinload(Personality.chat_llm_config))
                )
                if personality is None:
                    raise InvalidInputError(f"No personality with id {request.personality_id}.")
                cfg = self.chat_config(personality)
                tokens = self.count_tokens(cfg, [{"role": "user", "content": text}]) if text else 0
                conversation_id = await ensure_conversation(session, personality.id, venue)
                await store_messages(
                    session,
                    conversation_id,
                    [
                        NewMessage(
                            external_id=request.message_id,
                            author_id=request.user_id,
                            author_name=request.user_name,
                            role=MessageRole.USER,
                            content=text,
                            created_at=request.created_at or datetime.now(UTC),
                            token_count=tokens,
                        )
                    ],
                )
            prepared = PreparedReply(request, personality, conversation_id, cfg, None)
            if cfg is not None:
                if recall is None:
                    recall = self._start_recall(request)
                    if recall is not None and not self.overlap_recall:
                        # One connection serves one query at a time: finish recall before the prompt reads.
                        await asyncio.wait([recall])
                prepared.context = await self.build_prompt(prepared, recall)
                recall = None
            return prepared
        finally:
            if recall is not None:
                recall.cancel()

    def _start_recall(self, request: ChatRequest) -> asyncio.Task[list[str]] | None:
        if self._memory is None or self.recall_limit <= 0 or self.memory_context_share <= 0:
            return None
        return asyncio.create_task(self._recall(request))

    async def _recall(self, request: ChatRequest) -> list[str]:
        assert self._memory is not None
        try:
            recalled = await self._memory.recall(
                personality_id=request.personality_id,
                user_id=request.user_id,
                query=request.text,
                guild_id=request.guild_id,
                limit=self.recall_limit,
            )
        except Exception:
            # A broken index must not cost the reply: answer without memories.
            log.exception("Recall failed for personality %s", request.personality_id)
            return []
        return [m.content for m in recalled]

    async def build_prompt(
        self, prepared: PreparedReply, recall: asyncio.Task[list[str]] | None = None
    ) -> BuiltContext:
        cfg = prepared.cfg
        request = prepared.request
        window = self._llm.context_window(cfg) if cfg else 8192
        budget = ContextBudget.for_window(
            window,
            share=self.context_share,
            memory_share=self.memory_context_share,
            reply_tokens=cfg.max_tokens if cfg else 0,
        )
        async with self._sessionmaker() as session:
            rows = list(
                (
                    await session.scalars(
                        select(Message)
                        .where(Message.conversation_id == prepared.conversation_id)
                        .order_by(Message.id.desc())
                        .limit(HISTORY_LIMIT)
                    )
                ).all()
            )
            summary = (
                await summary_text(session, prepared.conversation_id) if self._rolling is not None else None
            )
        # Someone may have spoken after this message was stored: answer this one, with what came before.
        while rows and rows[0].external_id != request.message_id:
            rows.pop(0)
        history = [
            HistoryMessage(
                role=m.role, content=m.content, author_name=m.author_name, token_count=m.token_count
            )
            for m in reversed(rows)
        ] or [HistoryMessage(role="user", content=request.text, author_name=request.user_name)]
        memories = await recall if recall is not None else []
        return build_context(
            system_prompt=prepared.personality.system_prompt,
            user_name=request.user_name,
            memories=memories,
            summary=summary,
            history=history,
            budget=budget,
            count=lambda messages: self.count_tokens(cfg, messages),
            name_speakers=request.guild_id is not None,
        )

    async def stream(self, prepared: PreparedReply) -> AsyncIterator[str]:
        """The reply text in pieces, cleaned of chat-template tokens; raises ChatModelMissingError."""
        if prepared.cfg is None or prepared.context is None:
            raise ChatModelMissingError(NO_CHAT_MODEL)
        async for piece in self._llm.stream(prepared.cfg, prepared.context.messages):
            yield piece

    async def generate(
        self, prepared: PreparedReply, *, on_text: Callable[[str], None] | None = None
    ) -> ChatReply:
        """The whole reply, or a short neutral notice when the model fails (the user message stays)."""
        if prepared.cfg is None:
            return ChatReply(NO_CHAT_MODEL, ok=False, prepared=prepared, error="no chat model")
        pieces: list[str] = []
        try:
            async for piece in self.stream(prepared):
                pieces.append(piece)
                if on_text is not None:
                    on_text(piece)
        except LLMUnavailableError as exc:
            log.warning("Chat model failed for %s: %s", prepared.personality.name, exc)
            return ChatReply(UNAVAILABLE_REPLY, ok=False, prepared=prepared, error=str(exc))
        except LLMConfigError as exc:
            log.error("Chat model misconfigured for %s: %s", prepared.personality.name, exc)
            return ChatReply(MISCONFIGURED_REPLY, ok=False, prepared=prepared, error=str(exc))
        text = clean_reply("".join(pieces))
        if not text:
            return ChatReply(UNAVAILABLE_REPLY, ok=False, prepared=prepared, error="empty reply")
        return ChatReply(text, ok=True, prepared=prepared)

    async def record_reply(self, reply: ChatReply, parts: Sequence[tuple[str, str]]) -> int:
        """Store the sent reply: one assistant message per (external id, text) part; returns how many new."""
        prepared = reply.prepared
        personality = prepared.personality
        now = datetime.now(UTC)
        messages = [
            NewMessage(
                external_id=external_id,
                author_id=f"personality:{personality.name}",
                author_name=personality.display_name,
                role=MessageRole.ASSISTANT,
                content=text,
                created_at=now,
                token_count=self.count_tokens(prepared.cfg, [{"role": "assistant", "content": text}]),
            )
            for external_id, text in parts
        ]
        async with self._sessionmaker.begin() as session:
            return await store_messages(session, prepared.conversation_id, messages)

    async def reply(self, request: ChatRequest, *, reply_id: str | None = None) -> ChatReply:
        """Prepare, generate and store in one call (the terminal chat); the reply is stored as `reply_id`."""
        prepared = await self.prepare(request)
        reply = await self.generate(prepared)
        if reply.ok:
            await self.record_reply(reply, [(reply_id or f"{request.message_id}:reply", reply.text)])
        return reply

    # ------------------------------------------------------------------------ after the reply

    async def after_reply(self, conversation_id: int) -> AfterReplyReport:
        """Form memories for the new exchanges and update the rolling summary if due (background work)."""
        report = AfterReplyReport()
        if self._memory is not None:
            try:
                formed = await self._memory.form_pending(conversation_id=conversation_id)
            except Exception:
                # Nothing is marked done: the next reply or the catch-up pass retries it.
                log.exception("Memory formation failed for conversation %s; will retry", conversation_id)
                report.formation_failed = True
            else:
                report.remembered_message_ids = formed.remembered_message_ids
        report.summary = await self.update_summary(conversation_id)
        return report

    async def update_summary(self, conversation_id: int) -> SummaryUpdate | None:
        if self._rolling is None:
            return None
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .join(Conversation, Conversation.personality_id == Personality.id)
                .where(Conversation.id == conversation_id)
                .options(selectinload(Personality.summarizer_llm_config))
            )
        if personality is None:
            return None
        cfg = self._summary_config(personality)
        return await self._rolling.maybe_update(
            conversation_id, cfg=cfg, personality_name=personality.display_name
        )

    def _summary_config(self, personality: Personality) -> ModelConfig | None:
        if self._memory is not None:
            return self._memory.summarizer_config(personality)
        return self._summarizer_default

    async def reset_conversation(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> int:
        """Clear the conversation's rolling summary and title (long-term memories stay); rows removed."""
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker.begin() as session:
            conversation = await session.scalar(
                select(Conversation).where(
                    Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
                )
            )
            if conversation is None:
                return 0
            await session.execute(
                update(Conversation).where(Conversation.id == conversation.id).values(title=None)
            )
            return await clear_rolling_summary(session, conversation.id)

    async def conversation_title(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> str | None:
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker() as session:
            return await session.scalar(
                select(Conversation.title).where(
                    Conversation.personality_id == personality_id, Conversation.venue_key == venue.key
                )
            )


def clean_reply(text: str) -> str:
    """Model output without chat-template tokens that could start a fake turn."""
    return strip_chat_template_tokens(text).strip()
