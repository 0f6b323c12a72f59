"""The reply to one message: store it, recall and build the prompt, call the personality's model, record
the reply.

Takes plain ids and strings (Discord's cog and the terminal chat both drive it) and knows no Discord.
The steps, in order: `store_user_message` (the message is in the log before anything acts on it),
recall beside it and `build_prompt` within the token budget (`prepare` does these three), `generate`
(or `stream`), then `record_reply` once the reply was sent. Who is addressed is the routing
directory's question (memory.chat.routing); memory formation and the rolling summary run after the
reply, off the chat path (memory.chat.after_reply), when the caller schedules `after_reply`. The turn's
data (request, prepared prompt, reply, notices) is memory.chat.turns, and callers import it from here
too; answering a message again, the new answer replacing the old, is memory.chat.regenerate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.chat.after_reply import AfterReplyReport, AfterReplyWork
from memory.chat.prompt import (
    BuiltContext,
    CardParts,
    ContextBudget,
    HistoryMessage,
    PromptPersona,
    build_context,
)
from memory.chat.regenerate import ReplyRegenerator
from memory.chat.rolling import RollingSummarizer, summary_text
from memory.chat.routing import Route, RoutingDirectory
from memory.chat.turns import (
    MISCONFIGURED_REPLY,
    NO_CHAT_MODEL,
    UNAVAILABLE_REPLY,
    ChatModelMissingError,
    ChatReply,
    ChatRequest,
    PreparedReply,
    clean_reply,
    count_with,
    reply_messages,
)
from memory.conversations import LoggedMessage, Venue, conversation_title, ensure_conversation, store_messages
from memory.conversations import reset_conversation as reset_stored_conversation
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.pending import AwaitedReplies
from memory.llm import LLMClient, LLMConfigError, LLMUnavailableError
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personas import personas_for
from memory.types import MessageRole
from models import Message, Persona, Personality

if TYPE_CHECKING:  # the memory service pulls in the vector index and embedder
    from memory.service import MemoryService

log = logging.getLogger(__name__)

HISTORY_LIMIT = 80
# In a shared channel, the personas of this many other recent speakers are named (name and pronouns).
OTHER_SPEAKERS = 5
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
        memory: MemoryService | None = None,
        rolling: RollingSummarizer | None = None,
        context_share: float = 0.75,
        memory_context_share: float = 0.15,
        persona_context_share: float = 0.1,
        lore_context_share: float = 0.15,
        lore_scan_depth: int = 2,
        recall_limit: int = 5,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._llm = llm
        self._memory = memory
        self._rolling = rolling
        self.models = models
        self.routing = RoutingDirectory(sessionmaker)
        self.context_share = context_share
        self.memory_context_share = memory_context_share
        self.persona_context_share = persona_context_share
        self.lore_context_share = lore_context_share
        self.lore_scan_depth = lore_scan_depth  # messages a lorebook's keys are looked for in, by default
        self.recall_limit = recall_limit
        self._after_reply = AfterReplyWork(sessionmaker, models=models, memory=memory, rolling=rolling)
        # Messages being answered: formation leaves them for their own reply (see AwaitedReplies).
        self._awaited = memory.formation.awaited if memory is not None else AwaitedReplies()
        self.regenerate = ReplyRegenerator(self, sessionmaker, memory=memory)

    @property
    def memory(self) -> MemoryService | None:
        return self._memory

    async def route(
        self, text: str, *, channel_ids: Sequence[str], reply_to_message_id: str | None = None
    ) -> Route | None:
        """Which personality this message addresses, or None (see memory.chat.routing)."""
        return await self.routing.route(
            text, channel_ids=channel_ids, reply_to_message_id=reply_to_message_id
        )

    async def load_personality(self, personality_id: int) -> Personality:
        """The personality with its chat model config loaded (for `models.chat`)."""
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .where(Personality.id == personality_id)
                .options(selectinload(Personality.chat_llm_config))
            )
        if personality is None:
            raise InvalidInputError(f"No personality with id {personality_id}.")
        return personality

    # ------------------------------------------------------------------------ before the reply

    async def prepare(self, request: ChatRequest) -> PreparedReply:
        """Store the user's message, then recall and build the prompt to answer it within its budget."""
        # Recall (query embedding + search) needs nothing stored: it runs beside the storing.
        recall = self.start_recall(request)
        try:
            prepared = await self.store_user_message(request)
            if prepared.cfg is not None:
                prepared.context = await self.build_prompt(prepared, recall)
                recall = None
            return prepared
        finally:
            if recall is not None:
                recall.cancel()

    async def store_user_message(self, request: ChatRequest) -> PreparedReply:
        """Put the message in its conversation's log (once, by its id), counted with the chat model."""
        text = strip_chat_template_tokens(request.text)
        self._awaited.add(request.message_id)  # before it is stored: no formation pass sees it unawaited
        venue = Venue(guild_id=request.guild_id, channel_id=request.channel_id, user_id=request.user_id)
        async with self._sessionmaker.begin() as session:
            personality = await session.scalar(
                select(Personality)
                .where(Personality.id == request.personality_id)
                .options(selectinload(Personality.chat_llm_config))
            )
            if personality is None:
                raise InvalidInputError(f"No personality with id {request.personality_id}.")
            cfg = self.models.chat(personality)
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

    def start_recall(self, request: ChatRequest) -> asyncio.Task[list[str]] | None:
        """The user's memories that match the message, recalled in the background (None: no recall)."""
        if self._memory is None or self.recall_limit <= 0 or self.memory_context_share <= 0:
            return None
        return asyncio.create_task(self._recall(self._memory, request))

    async def _recall(self, memory: MemoryService, request: ChatRequest) -> list[str]:
        try:
            recalled = await memory.recall(
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
        # A memory of this very message's exchange (its reply being regenerated) is not recalled into it.
        return [m.text_with_context for m in recalled if request.message_id not in m.sources_with_context]

    async def build_prompt(
        self, prepared: PreparedReply, recall: asyncio.Task[list[str]] | None = None
    ) -> BuiltContext:
        """The prompt for the stored message: system prompt, recalled memories, summary, recent history."""
        cfg = prepared.cfg
        request = prepared.request
        window = self._llm.context_window(cfg) if cfg else NO_MODEL_CONTEXT_WINDOW
        budget = ContextBudget.for_window(
            window,
            share=self.context_share,
            memory_share=self.memory_context_share,
            persona_share=self.persona_context_share,
            lore_share=self.lore_context_share,
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
            # Someone may have spoken after this message was stored: answer this one, with what came before.
            while rows and rows[0].external_id != request.message_id:
                rows.pop(0)
            summary = (
                await summary_text(session, prepared.conversation_id) if self._rolling is not None else None
            )
            others = _other_speakers(rows, request.user_id) if request.guild_id is not None else {}
            personas = await personas_for(session, [request.user_id, *others], prepared.personality.id)
        history = [
            HistoryMessage(
                role=m.role, content=m.content, author_name=m.author_name, token_count=m.token_count
            )
            for m in reversed(rows)
        ] or [HistoryMessage(role="user", content=request.text, author_name=request.user_name)]
        memories = await recall if recall is not None else []
        answered = personas.get(request.user_id)
        card = CardParts.of(
            prepared.personality.card,
            display_name=prepared.personality.display_name,
            recent=[m.content for m in history],
            user=answered.name if answered is not None else request.user_name,
            default_scan_depth=self.lore_scan_depth,
        )
        return build_context(
            system_prompt=prepared.personality.system_prompt,
            user_name=request.user_name,
            memories=memories,
            summary=summary,
            history=history,
            budget=budget,
            model=cfg.model if cfg else None,
            name_speakers=request.guild_id is not None,
            persona=_prompt_persona(personas.get(request.user_id), request.user_name),
            others=[
                p for i, name in others.items() if (p := _prompt_persona(personas.get(i), name)) is not None
            ],
            card=card,
        )

    # ------------------------------------------------------------------------ the reply

    async def stream(self, prepared: PreparedReply) -> AsyncIterator[str]:
        """The reply text in pieces as the model writes it; raises ChatModelMissingError."""
        if prepared.cfg is None or prepared.context is None:
            raise ChatModelMissingError(NO_CHAT_MODEL)
        async for piece in self._llm.stream(prepared.cfg, prepared.context.messages):
            yield piece

    async def generate(
        self, prepared: PreparedReply, *, on_text: Callable[[str], None] | None = None
    ) -> ChatReply:
        """The whole reply, or a short neutral notice when the model fails (the user message stays)."""
        reply = await self._generate(prepared, on_text)
        if not reply.ok:  # no reply will be stored: the message joins its author's next exchange
            self._awaited.discard(prepared.request.message_id)
        return reply

    async def _generate(self, prepared: PreparedReply, on_text: Callable[[str], None] | None) -> ChatReply:
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
        """Store the sent reply: one assistant message per (external id, text) part; returns how many new.
        Each part records the message it answers: memories follow that link, whatever order replies end in.
        """
        prepared = reply.prepared
        messages = reply_messages(prepared, parts, created_at=datetime.now(UTC))
        async with self._sessionmaker.begin() as session:
            stored = await store_messages(session, prepared.conversation_id, messages)
        self._awaited.discard(prepared.request.message_id)
        return stored

    def will_not_answer(self, prepared: PreparedReply) -> None:
        """The stored message gets no reply (missed while offline, too old to answer late): formation
        takes it into its author's next answered exchange instead of waiting for its own reply."""
        self._awaited.discard(prepared.request.message_id)

    async def reply(self, request: ChatRequest, *, reply_id: str | None = None) -> ChatReply:
        """Prepare, generate and record in one call; the reply is stored as `reply_id`."""
        prepared = await self.prepare(request)
        reply = await self.generate(prepared)
        if reply.ok:
            await self.record_reply(reply, [(reply_id or f"{request.message_id}:reply", reply.text)])
        return reply

    # ------------------------------------------------------------------------ after the reply

    async def after_reply(self, conversation_id: int) -> AfterReplyReport:
        """Form the new exchanges' memories and update the rolling summary if due (background work)."""
        return await self._after_reply.run(conversation_id)

    async def reset_conversation(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> int:
        """Clear the conversation's rolling summary and title (long-term memories stay); rows removed."""
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker.begin() as session:
            return await reset_stored_conversation(session, personality_id, venue)

    async def conversation_title(
        self, *, personality_id: int, guild_id: str | None, channel_id: str | None, user_id: str
    ) -> str | None:
        venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        async with self._sessionmaker() as session:
            return await conversation_title(session, personality_id, venue)


def _other_speakers(rows: Sequence[Message], user_id: str) -> dict[str, str]:
    """The other users who spoke in `rows` (newest first), most recent first: id -> name they wrote as."""
    speakers: dict[str, str] = {}
    for row in rows:
        if row.role == MessageRole.USER.value and row.author_id != user_id and row.author_id not in speakers:
            speakers[row.author_id] = row.author_name or "someone"
            if len(speakers) == OTHER_SPEAKERS:
                break
    return speakers


def _prompt_persona(persona: Persona | None, speaker: str) -> PromptPersona | None:
    if persona is None:
        return None
    return PromptPersona(speaker=speaker, name=persona.name, pronouns=persona.pronouns, about=persona.about)
