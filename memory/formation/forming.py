"""Forming memories: complete exchanges of the message log become memories, written and indexed.

Batch by batch, one conversation at a time (claimed FOR UPDATE SKIP LOCKED, so any number of workers
share the work), each exchange gets the mode its user and personality chose: verbatim, cleaned when
too short to summarize, or summarized (keeping the verbatim text too in hybrid mode or when the
summary lost a fact). Rows are written and the messages marked processed in one transaction; the
points are indexed after it, and a crash in between leaves them 'formed' for `index_pending`.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from memory.formation.cleaning import strip_chat_template_tokens, strip_roleplay_formatting
from memory.formation.exchanges import Exchange, LoggedMessage, group_exchanges
from memory.formation.fidelity import fidelity_misses
from memory.formation.mode import effective_mode
from memory.formation.summarizer import EXTRACTIVE, ExchangeSummarizer
from memory.owners.model_configs import ModelConfigResolver
from memory.recall.store import MemoryStore, memory_id, memory_point, upsert_memories
from memory.tokens import count_tokens
from memory.types import IndexPoint, MemoryMode, MemoryState, ModelConfig, ProgressCallback
from models import Conversation, Memory, Message, Personality, UserSettings

CLEANED = "cleaned"
VERBATIM = "verbatim"
CONTEXT_BEFORE = 3  # processed messages read before the batch, as the first exchange's context


@dataclass
class FormationReport:
    exchanges: int = 0
    memories: int = 0
    skipped: int = 0
    extractive: int = 0
    fidelity_misses: int = 0
    remembered_message_ids: list[str] = field(default_factory=list)

    def add(self, other: FormationReport) -> None:
        self.exchanges += other.exchanges
        self.memories += other.memories
        self.skipped += other.skipped
        self.extractive += other.extractive
        self.fidelity_misses += other.fidelity_misses
        self.remembered_message_ids.extend(other.remembered_message_ids)


@dataclass(frozen=True, slots=True)
class _Formed:
    exchange: Exchange
    mode: MemoryMode
    content: str
    content_verbatim: str | None
    summarized: bool
    summarizer: str
    misses: list[str]
    source_chars: int


class MemoryFormation:
    """Turns pending messages into memories; see the module docstring for the steps."""

    def __init__(
        self,
        store: MemoryStore,
        summarizer: ExchangeSummarizer,
        models: ModelConfigResolver,
        *,
        min_summarize_tokens: int,
        batch_size: int,
    ) -> None:
        self._store = store
        self._summarizer = summarizer
        self._models = models
        self._min_summarize_tokens = min_summarize_tokens
        self._batch_size = batch_size

    async def form_pending(
        self,
        *,
        conversation_id: int | None = None,
        personality_id: int | None = None,
        mode_override: MemoryMode | None = None,
        progress: ProgressCallback | None = None,
    ) -> FormationReport:
        """Turn every complete, unprocessed exchange into a memory, batch by batch, then index them."""
        await self._store.ready()
        report = FormationReport()
        while True:
            batch = await self._form_batch(conversation_id, personality_id, mode_override)
            if batch is None:
                break
            report.add(batch)
            if progress is not None:
                progress(batch.exchanges)
        await self._store.index_pending()
        return report

    async def _form_batch(
        self, conversation_id: int | None, personality_id: int | None, mode_override: MemoryMode | None
    ) -> FormationReport | None:
        async with self._store.sessionmaker.begin() as session:
            has_pending = exists().where(
                Message.conversation_id == Conversation.id, Message.memory_processed_at.is_(None)
            )
            query = select(Conversation).where(has_pending)
            if conversation_id is not None:
                query = query.where(Conversation.id == conversation_id)
            if personality_id is not None:
                query = query.where(Conversation.personality_id == personality_id)
            # One conversation is claimed at a time; other workers skip it (never wait on it) and
            # take the next. Conversations holding only unanswered messages are passed over.
            # FOR NO KEY UPDATE (key_share): storing a new message checks its foreign key with a
            # KEY SHARE lock on the conversation, which a plain FOR UPDATE would block for as long as
            # formation summarizes; formation passes still exclude each other.
            formed = None
            passed_over: list[int] = []
            while formed is None:
                claim = (
                    query.order_by(Conversation.id).limit(1).with_for_update(skip_locked=True, key_share=True)
                )
                if passed_over:
                    claim = claim.where(Conversation.id.not_in(passed_over))
                conversation = await session.scalar(claim)
                if conversation is None:
                    break
                formed = await self._form_conversation_batch(session, conversation, mode_override)
                passed_over.append(conversation.id)
        if formed is None:
            return None
        report, points = formed
        await self._store.index_points(points)
        return report

    async def _pending_exchanges(
        self, session: AsyncSession, conversation: Conversation
    ) -> tuple[list[Exchange], list[LoggedMessage], bool] | None:
        """The next batch of exchanges, the orphan replies before them, and whether a user waits."""
        pending_query = (
            select(Message)
            .where(Message.conversation_id == conversation.id, Message.memory_processed_at.is_(None))
            .order_by(Message.id)
        )
        # Read a window, not a whole imported history; it may cut the last exchange short.
        window = self._batch_size * 16
        pending = [LoggedMessage.of(m) for m in (await session.scalars(pending_query.limit(window))).all()]
        if not pending:
            return None
        truncated = len(pending) == window
        before = await session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation.id, Message.id < pending[0].id)
            .order_by(Message.id.desc())
            .limit(CONTEXT_BEFORE)
        )
        history = [LoggedMessage.of(m) for m in reversed(before.all())]
        grouping = group_exchanges(pending, history=history)
        exchanges = grouping.exchanges[: self._batch_size]
        if truncated and len(exchanges) == len(grouping.exchanges):
            # The window may end inside the last exchange's reply: leave that one for the next batch,
            # or read everything when it is the only one (a reply split into very many parts).
            if len(exchanges) > 1:
                exchanges = exchanges[:-1]
            else:
                pending = [LoggedMessage.of(m) for m in (await session.scalars(pending_query)).all()]
                grouping = group_exchanges(pending, history=history)
                exchanges = grouping.exchanges[: self._batch_size]
        return exchanges, grouping.orphans, bool(grouping.waiting)

    async def _form_conversation_batch(
        self, session: AsyncSession, conversation: Conversation, mode_override: MemoryMode | None
    ) -> tuple[FormationReport, list[IndexPoint]] | None:
        found = await self._pending_exchanges(session, conversation)
        if found is None:
            return None
        exchanges, orphans, waiting = found
        if not exchanges:
            if orphans and not waiting:
                await _mark_processed(session, conversation.id, orphans[-1].id)
                return FormationReport(), []
            return None  # only user messages waiting for a reply

        personality = await session.scalar(
            select(Personality)
            .where(Personality.id == conversation.personality_id)
            .options(
                selectinload(Personality.summarizer_llm_config), selectinload(Personality.summarizer_prompt)
            )
        )
        assert personality is not None
        settings = (
            await session.scalars(
                select(UserSettings).where(
                    UserSettings.user_id.in_({e.user_id for e in exchanges}),
                    or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality.id),
                )
            )
        ).all()
        cfg = self._models.summarizer(personality)
        prompt = personality.summarizer_prompt.content if personality.summarizer_prompt else None

        report = FormationReport(exchanges=len(exchanges))
        jobs = []
        for exchange in exchanges:
            mode, _ = effective_mode(personality, [s for s in settings if s.user_id == exchange.user_id])
            if mode is not None and mode_override is not None:
                mode = mode_override
            if mode is None:
                report.skipped += 1
                continue
            jobs.append(self._form_one(exchange, mode, personality, cfg, prompt))
        formed: list[_Formed] = list(await asyncio.gather(*jobs))
        vectors = await self._store.embedder.embed([f.content for f in formed]) if formed else []
        rows = [self._memory_row(conversation, f) for f in formed]
        for item in formed:
            report.memories += 1
            report.extractive += item.summarizer == EXTRACTIVE
            report.fidelity_misses += bool(item.misses)
            report.remembered_message_ids.extend(m.external_id for m in item.exchange.user_messages)
        written: set[uuid.UUID] = set()
        if rows:
            written = set((await session.scalars(upsert_memories(rows).returning(Memory.id))).all())
        await _mark_processed(session, conversation.id, exchanges[-1].replies[-1].id)
        # Only rows actually written are indexed: a forgotten memory's tombstone was left alone.
        points = [memory_point(row, v) for row, v in zip(rows, vectors, strict=True) if row["id"] in written]
        return report, points

    async def _form_one(
        self,
        exchange: Exchange,
        mode: MemoryMode,
        personality: Personality,
        cfg: ModelConfig | None,
        prompt: str | None,
    ) -> _Formed:
        verbatim = exchange.render(personality_name=personality.display_name)
        # Characters, as Postgres `length()` counts the stored text: the storage figures compare alike.
        source_chars = len(verbatim)
        if mode is MemoryMode.VERBATIM:
            return _Formed(exchange, mode, verbatim, None, False, VERBATIM, [], source_chars)
        cleaned = strip_roleplay_formatting(strip_chat_template_tokens(verbatim))
        if count_tokens(cleaned) < self._min_summarize_tokens:
            # Too short to gain from a summary: the cleaned text is the memory (or the original,
            # when cleaning left nothing worth searching, as with an emoji-only exchange).
            content = cleaned if cleaned.strip() and len(cleaned) < len(verbatim) else verbatim
            keep = verbatim if mode is MemoryMode.HYBRID else None
            return _Formed(exchange, mode, content, keep, False, CLEANED, [], source_chars)
        result = await self._summarizer.summarize(
            verbatim,
            cfg=cfg,
            prompt=prompt,
            context=exchange.render_context(personality_name=personality.display_name),
        )
        # Facts are checked against the cleaned text: a name only inside an *action* is roleplay.
        misses = fidelity_misses(cleaned, result.text)
        keep_verbatim = mode is MemoryMode.HYBRID or bool(misses)
        return _Formed(
            exchange,
            mode,
            result.text,
            verbatim if keep_verbatim else None,
            True,
            result.summarizer,
            misses,
            source_chars,
        )

    def _memory_row(self, conversation: Conversation, formed: _Formed) -> dict[str, Any]:
        exchange = formed.exchange
        return {
            "id": memory_id(conversation.personality_id, conversation.venue_key, exchange.source_message_ids),
            "personality_id": conversation.personality_id,
            "user_id": exchange.user_id,
            "guild_id": conversation.guild_id,
            "channel_id": conversation.channel_id,
            "is_dm": conversation.is_dm,
            "conversation_id": conversation.id,
            "mode": formed.mode.value,
            "content": formed.content,
            "content_verbatim": formed.content_verbatim,
            "source_chars": formed.source_chars,
            "summarized": formed.summarized,
            "summarizer": formed.summarizer,
            "source_message_ids": exchange.source_message_ids,
            "occurred_at": exchange.occurred_at,
            "fidelity_misses": formed.misses,
            "state": MemoryState.FORMED.value,
            "embedding_model": self._store.embedding_model,
        }


async def pending_message_count(
    store: MemoryStore, personality_id: int | None = None, user_id: str | None = None
) -> int:
    """Messages not yet turned into memories (a user's own, when user_id is given)."""
    async with store.sessionmaker() as session:
        query = select(func.count(Message.id)).where(Message.memory_processed_at.is_(None))
        if personality_id is not None:
            query = query.join(Conversation).where(Conversation.personality_id == personality_id)
        if user_id is not None:
            query = query.where(Message.author_id == user_id)
        return int(await session.scalar(query) or 0)


async def _mark_processed(session: AsyncSession, conversation_id: int, up_to_message_id: int) -> None:
    await session.execute(
        update(Message)
        .where(
            Message.conversation_id == conversation_id,
            Message.id <= up_to_message_id,
            Message.memory_processed_at.is_(None),
        )
        .values(memory_processed_at=datetime.now(UTC))
    )
