"""Long-term memory: form memories from the message log, index them, recall them, let users steer them.

Postgres is the source of truth; the vector index only maps queries to memory ids. Every step is
idempotent: memory ids derive from the personality, the venue and the source messages, so a retry
rewrites the same row, and the state column says how far each memory got.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.errors import InvalidInputError
from memory.formation.cleaning import (
    approx_tokens,
    fidelity_misses,
    strip_chat_template_tokens,
    strip_roleplay_formatting,
)
from memory.formation.exchanges import Exchange, LoggedMessage, group_exchanges, render_lines
from memory.formation.summarizer import EXTRACTIVE, ExchangeSummarizer
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.keywords import encode_sparse, encode_sparse_query
from memory.types import (
    IndexPoint,
    MemoryMode,
    MemoryPayload,
    MemoryState,
    MessageRole,
    ModelConfig,
    RecallFilter,
    SummarizationPreference,
)
from models import Conversation, LLMConfig, Memory, Message, Personality, UserSettings

log = logging.getLogger(__name__)

MEMORY_ID_NAMESPACE = uuid.UUID("6f1c1a52-4e2b-4d7e-9a51-2b1f3c9e8d40")
CLEANED = "cleaned"
VERBATIM = "verbatim"
ProgressCallback = Callable[[int], None]


def memory_id(personality_id: int, venue_key: str, source_message_ids: Sequence[str]) -> uuid.UUID:
    """The same sources always give the same id: a retried write updates, never duplicates."""
    return uuid.uuid5(MEMORY_ID_NAMESPACE, f"{personality_id}|{venue_key}|" + "|".join(source_message_ids))


def model_config_from(config: LLMConfig) -> ModelConfig:
    """An admin-made LLM config as litellm arguments; its key is read from the named variable."""
    return ModelConfig(
        model=config.model,
        api_base=config.api_base,
        api_key=os.environ.get(config.api_key_env) if config.api_key_env else None,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        timeout=config.timeout,
        context_window=config.context_window,
    )


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    id: uuid.UUID
    score: float
    content: str
    content_verbatim: str | None
    source_message_ids: list[str]
    occurred_at: datetime
    summarized: bool
    summarizer: str


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
class ModeStats:
    mode: str
    summarizer: str
    memories: int
    source_bytes: int
    stored_bytes: int
    fidelity_misses: int


@dataclass(frozen=True, slots=True)
class MemoryStats:
    rows: list[ModeStats]
    pending_messages: int
    unindexed_memories: int

    @property
    def memories(self) -> int:
        return sum(r.memories for r in self.rows)

    @property
    def source_bytes(self) -> int:
        return sum(r.source_bytes for r in self.rows)

    @property
    def stored_bytes(self) -> int:
        return sum(r.stored_bytes for r in self.rows)

    @property
    def saving_percent(self) -> float:
        return 100.0 * (1 - self.stored_bytes / self.source_bytes) if self.source_bytes else 0.0


@dataclass(frozen=True, slots=True)
class DriftReport:
    in_postgres: int
    in_index: int
    missing_from_index: int
    stale_in_index: int

    @property
    def drift(self) -> bool:
        return bool(self.missing_from_index or self.stale_in_index)


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


class MemoryService:
    """Forms, indexes, recalls and deletes long-term memories. Takes plain ids; knows no Discord."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        index: VectorIndex,
        embedder: Embedder,
        summarizer: ExchangeSummarizer,
        default_summarizer: ModelConfig | None = None,
        min_summarize_tokens: int = 40,
        batch_size: int = 64,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._index = index
        self._embedder = embedder
        self._summarizer = summarizer
        self._default_summarizer = default_summarizer
        self._min_summarize_tokens = min_summarize_tokens
        self._batch_size = batch_size
        self._collection_ready = False

    @property
    def embedding_model(self) -> str:
        return self._embedder.model_name

    async def _ensure_collection(self) -> None:
        if not self._collection_ready:
            await self._index.ensure_collection(self._embedder.dimension)
            self._collection_ready = True

    # ----------------------------------------------------------------- settings resolution

    def summarizer_config(self, personality: Personality) -> ModelConfig | None:
        """The personality's summarizer: its LLM config, its model string, or the deployment default."""
        if personality.summarizer_llm_config is not None:
            return model_config_from(personality.summarizer_llm_config)
        if personality.summarizer_model:
            base = self._default_summarizer
            return ModelConfig(
                model=personality.summarizer_model,
                timeout=base.timeout if base else 60.0,
                temperature=base.temperature if base else 0.3,
            )
        return self._default_summarizer

    @staticmethod
    def effective_mode(
        personality: Personality, user_settings: Sequence[UserSettings]
    ) -> tuple[MemoryMode | None, str]:
        """The mode memories of this user get (None: memory off) and where that choice comes from."""
        if not personality.memory_enabled:
            return None, "personality"
        specific = next((s for s in user_settings if s.personality_id == personality.id), None)
        general = next((s for s in user_settings if s.personality_id is None), None)
        for source, setting in (("user (this personality)", specific), ("user", general)):
            if setting is not None and setting.memory_enabled is False:
                return None, source
        personality_mode = MemoryMode(personality.memory_mode)
        for source, setting in (("user (this personality)", specific), ("user", general)):
            if setting is None or setting.summarization == SummarizationPreference.DEFAULT:
                continue
            if setting.summarization == SummarizationPreference.DISABLED:
                return MemoryMode.VERBATIM, source
            keep_hybrid = personality_mode is MemoryMode.HYBRID
            return (MemoryMode.HYBRID if keep_hybrid else MemoryMode.SUMMARIZED), source
        return personality_mode, "personality"

    # ----------------------------------------------------------------------- formation

    async def form_pending(
        self,
        *,
        conversation_id: int | None = None,
        personality_id: int | None = None,
        mode_override: MemoryMode | None = None,
        progress: ProgressCallback | None = None,
    ) -> FormationReport:
        """Turn every complete, unprocessed exchange into a memory, batch by batch, then index them."""
        await self._ensure_collection()
        report = FormationReport()
        while True:
            batch = await self._form_batch(conversation_id, personality_id, mode_override)
            if batch is None:
                break
            report.add(batch)
            if progress is not None:
                progress(batch.exchanges)
        await self.index_pending()
        return report

    async def pending_message_count(
        self, personality_id: int | None = None, user_id: str | None = None
    ) -> int:
        """Messages not yet turned into memories (a user's own, when user_id is given)."""
        async with self._sessionmaker() as session:
            query = select(func.count(Message.id)).where(Message.memory_processed_at.is_(None))
            if personality_id is not None:
                query = query.join(Conversation).where(Conversation.personality_id == personality_id)
            if user_id is not None:
                query = query.where(Message.author_id == user_id)
            return int(await session.scalar(query) or 0)

    async def _form_batch(
        self, conversation_id: int | None, personality_id: int | None, mode_override: MemoryMode | None
    ) -> FormationReport | None:
        async with self._sessionmaker.begin() as session:
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
            formed = None
            passed_over: list[int] = []
            while formed is None:
                claim = query.order_by(Conversation.id).limit(1).with_for_update(skip_locked=True)
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
        # Indexed after the commit; a crash before this leaves them 'formed' for index_pending().
        await self._index_points(points)
        return report

    async def _form_conversation_batch(
        self, session: AsyncSession, conversation: Conversation, mode_override: MemoryMode | None
    ) -> tuple[FormationReport, list[IndexPoint]] | None:
        pending_query = (
            select(Message)
            .where(Message.conversation_id == conversation.id, Message.memory_processed_at.is_(None))
            .order_by(Message.id)
        )
        # Read a window, not a whole imported history; it may cut the last exchange short.
        window = self._batch_size * 16
        pending = [_logged(m) for m in (await session.scalars(pending_query.limit(window))).all()]
        if not pending:
            return None
        truncated = len(pending) == window
        history = [
            _logged(m)
            for m in reversed(
                (
                    await session.scalars(
                        select(Message)
                        .where(Message.conversation_id == conversation.id, Message.id < pending[0].id)
                        .order_by(Message.id.desc())
                        .limit(3)
                    )
                ).all()
            )
        ]
        grouping = group_exchanges(pending, history=history)
        exchanges = grouping.exchanges[: self._batch_size]
        if truncated and len(exchanges) == len(grouping.exchanges):
            # The window may end inside the last exchange's reply: leave that one for the next batch,
            # or read everything when it is the only one (a reply split into very many parts).
            if len(exchanges) > 1:
                exchanges = exchanges[:-1]
            else:
                pending = [_logged(m) for m in (await session.scalars(pending_query)).all()]
                grouping = group_exchanges(pending, history=history)
                exchanges = grouping.exchanges[: self._batch_size]
        if not exchanges:
            if grouping.orphans and not grouping.waiting:
                await _mark_processed(session, conversation.id, grouping.orphans[-1].id)
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
        user_ids = {e.user_id for e in exchanges}
        settings = (
            await session.scalars(
                select(UserSettings).where(
                    UserSettings.user_id.in_(user_ids),
                    or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality.id),
                )
            )
        ).all()
        cfg = self.summarizer_config(personality)
        prompt = personality.summarizer_prompt.content if personality.summarizer_prompt else None

        report = FormationReport(exchanges=len(exchanges))
        jobs = []
        for exchange in exchanges:
            mode, _ = self.effective_mode(personality, [s for s in settings if s.user_id == exchange.user_id])
            if mode is not None and mode_override is not None:
                mode = mode_override
            if mode is None:
                report.skipped += 1
                continue
            jobs.append(self._form_one(exchange, mode, personality, cfg, prompt))
        formed: list[_Formed] = list(await asyncio.gather(*jobs))
        vectors = await self._embedder.embed([f.content for f in formed]) if formed else []
        rows = [self._memory_row(conversation, f) for f in formed]
        for row, item in zip(rows, formed, strict=True):
            report.memories += 1
            report.extractive += item.summarizer == EXTRACTIVE
            report.fidelity_misses += bool(item.misses)
            report.remembered_message_ids.extend(m.external_id for m in item.exchange.user_messages)
            row["embedding_model"] = self._embedder.model_name
        written: set[uuid.UUID] = set()
        if rows:
            written = set((await session.scalars(_upsert_memories(rows).returning(Memory.id))).all())
        await _mark_processed(session, conversation.id, exchanges[-1].replies[-1].id)
        # Only rows actually written are indexed: a forgotten memory's tombstone was left alone.
        points = [_point(row, vec) for row, vec in zip(rows, vectors, strict=True) if row["id"] in written]
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
        source_chars = len(verbatim.encode())
        if mode is MemoryMode.VERBATIM:
            return _Formed(exchange, mode, verbatim, None, False, VERBATIM, [], source_chars)
        cleaned = strip_roleplay_formatting(strip_chat_template_tokens(verbatim))
        if approx_tokens(cleaned) < self._min_summarize_tokens:
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
        }

    # ------------------------------------------------------------------------ indexing

    async def _index_points(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        await self._index.upsert(points)
        async with self._sessionmaker.begin() as session:
            await session.execute(
                update(Memory)
                .where(Memory.id.in_([p.id for p in points]), Memory.state == MemoryState.FORMED.value)
                .values(state=MemoryState.INDEXED.value)
            )

    async def index_pending(self, *, batch: int = 256) -> int:
        """Index memories written to Postgres but not yet searchable (after a crash, say)."""
        await self._ensure_collection()
        done = 0
        while True:
            async with self._sessionmaker() as session:
                memories = (
                    await session.scalars(
                        select(Memory)
                        .where(Memory.state == MemoryState.FORMED.value)
                        .order_by(Memory.id)
                        .limit(batch)
                    )
                ).all()
            if not memories:
                return done
            vectors = await self._embedder.embed([m.content for m in memories])
            await self._index_points([_point(_row_of(m), v) for m, v in zip(memories, vectors, strict=True)])
            done += len(memories)

    # -------------------------------------------------------------------------- recall

    async def recall(
        self,
        *,
        personality_id: int,
        user_id: str,
        query: str,
        guild_id: str | None = None,
        limit: int = 5,
    ) -> list[RecalledMemory]:
        """The user's memories of this personality that best match the query, for this venue only."""
        query = strip_chat_template_tokens(query).strip()
        if not query or limit <= 0:
            return []
        await self._ensure_collection()
        allow_dm = False
        if guild_id is not None:
            async with self._sessionmaker() as session:
                allow_dm = bool(
                    await session.scalar(
                        select(func.bool_or(UserSettings.allow_dm_recall_in_guilds)).where(
                            UserSettings.user_id == user_id,
                            or_(
                                UserSettings.personality_id.is_(None),
                                UserSettings.personality_id == personality_id,
                            ),
                        )
                    )
                )
        dense = (await self._embedder.embed([query]))[0]
        flt = RecallFilter(
            personality_id=personality_id, user_id=user_id, guild_id=guild_id, allow_dm=allow_dm
        )
        hits = await self._index.search(
            dense=dense, sparse=encode_sparse_query(query), flt=flt, limit=limit * 2
        )
        if not hits:
            return []
        scores = {hit.id: hit.score for hit in hits}
        async with self._sessionmaker() as session:
            # The text comes from Postgres, re-checking ownership: a stale index entry can't leak or revive.
            rows = (
                await session.scalars(
                    select(Memory).where(
                        Memory.id.in_(list(scores)),
                        Memory.state != MemoryState.DELETED.value,
                        Memory.personality_id == personality_id,
                        Memory.user_id == user_id,
                    )
                )
            ).all()
        rows = sorted(rows, key=lambda m: (-scores[m.id], -m.occurred_at.timestamp()))[:limit]
        return [
            RecalledMemory(
                id=m.id,
                score=scores[m.id],
                content=m.content,
                content_verbatim=m.content_verbatim,
                source_message_ids=list(m.source_message_ids),
                occurred_at=m.occurred_at,
                summarized=m.summarized,
                summarizer=m.summarizer,
            )
            for m in rows
        ]

    # ------------------------------------------------------------------ user controls

    async def forget(
        self,
        *,
        user_id: str,
        personality_id: int | None = None,
        memory_ids: Sequence[uuid.UUID] | None = None,
    ) -> int:
        """Delete the user's memories (all, one personality's, or the given ids); returns how many."""
        conditions = [Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value]
        if personality_id is not None:
            conditions.append(Memory.personality_id == personality_id)
        if memory_ids is not None:
            conditions.append(Memory.id.in_(list(memory_ids)))
        async with self._sessionmaker.begin() as session:
            # A tombstone, text wiped: re-importing the same messages must not bring it back.
            deleted = (
                await session.scalars(
                    update(Memory)
                    .where(and_(*conditions))
                    .values(
                        state=MemoryState.DELETED.value, content="", content_verbatim=None, fidelity_misses=[]
                    )
                    .returning(Memory.id)
                )
            ).all()
        if deleted:
            await self._ensure_collection()
            await self._index.delete(list(deleted))
        return len(deleted)

    async def export(self, *, user_id: str, personality_id: int | None = None) -> list[dict[str, Any]]:
        """The user's memories as JSON-ready dicts, with provenance and verbatim text when kept."""
        query = (
            select(Memory, Personality.name)
            .join(Personality)
            .where(Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value)
        )
        if personality_id is not None:
            query = query.where(Memory.personality_id == personality_id)
        async with self._sessionmaker() as session:
            rows = (await session.execute(query.order_by(Memory.occurred_at))).all()
        return [
            {
                "id": str(m.id),
                "personality": name,
                "user_id": m.user_id,
                "guild_id": m.guild_id,
                "channel_id": m.channel_id,
                "is_dm": m.is_dm,
                "mode": m.mode,
                "content": m.content,
                "content_verbatim": m.content_verbatim,
                "summarized": m.summarized,
                "summarizer": m.summarizer,
                "source_message_ids": list(m.source_message_ids),
                "occurred_at": m.occurred_at.isoformat(),
                "fidelity_misses": list(m.fidelity_misses),
            }
            for m, name in rows
        ]

    async def stats(self, *, personality_id: int | None = None, user_id: str | None = None) -> MemoryStats:
        stored = func.length(Memory.content) + func.coalesce(func.length(Memory.content_verbatim), 0)
        query = select(
            Memory.mode,
            Memory.summarizer,
            func.count(Memory.id),
            func.coalesce(func.sum(Memory.source_chars), 0),
            func.coalesce(func.sum(stored), 0),
            func.count(Memory.id).filter(func.jsonb_array_length(Memory.fidelity_misses) > 0),
        ).where(Memory.state != MemoryState.DELETED.value)
        if personality_id is not None:
            query = query.where(Memory.personality_id == personality_id)
        if user_id is not None:
            query = query.where(Memory.user_id == user_id)
        unindexed = select(func.count(Memory.id)).where(Memory.state == MemoryState.FORMED.value)
        if personality_id is not None:
            unindexed = unindexed.where(Memory.personality_id == personality_id)
        async with self._sessionmaker() as session:
            rows = (await session.execute(query.group_by(Memory.mode, Memory.summarizer))).all()
            unindexed_count = int(await session.scalar(unindexed) or 0)
        return MemoryStats(
            rows=[ModeStats(r[0], r[1], r[2], int(r[3]), int(r[4]), r[5]) for r in sorted(rows)],
            pending_messages=await self.pending_message_count(personality_id, user_id),
            unindexed_memories=unindexed_count,
        )

    # ------------------------------------------------------------------- maintenance

    async def check_drift(self, *, personality_id: int | None = None) -> DriftReport:
        await self._ensure_collection()
        query = select(Memory.id, Memory.state)
        if personality_id is not None:
            query = query.where(Memory.personality_id == personality_id)
        async with self._sessionmaker() as session:
            rows = (await session.execute(query)).all()
        live = {i for i, state in rows if state != MemoryState.DELETED.value}
        indexed = await self._index.ids(personality_id)
        return DriftReport(
            in_postgres=len(live),
            in_index=len(indexed),
            missing_from_index=len(live - indexed),
            stale_in_index=len(indexed - live),
        )

    async def reindex(
        self, *, personality_id: int | None = None, progress: ProgressCallback | None = None, batch: int = 256
    ) -> int:
        """Rebuild the index from Postgres (re-embedding with the current model); returns memories indexed.

        For all personalities the collection is recreated empty first, so a new EMBEDDING_MODEL of
        another dimension works; for one personality its points are rewritten in place.
        """
        query = select(Memory.id).where(Memory.state != MemoryState.DELETED.value)
        if personality_id is not None:
            query = query.where(Memory.personality_id == personality_id)
        async with self._sessionmaker() as session:
            live = set((await session.scalars(query)).all())
        if personality_id is None:
            await self._index.recreate(self._embedder.dimension)
            self._collection_ready = True
        else:
            await self._ensure_collection()
            stale = await self._index.ids(personality_id) - live
            if stale:
                await self._index.delete(sorted(stale))
        ordered = sorted(live)
        for start in range(0, len(ordered), batch):
            ids = ordered[start : start + batch]
            async with self._sessionmaker() as session:
                memories = (await session.scalars(select(Memory).where(Memory.id.in_(ids)))).all()
            vectors = await self._embedder.embed([m.content for m in memories])
            await self._index.upsert([_point(_row_of(m), v) for m, v in zip(memories, vectors, strict=True)])
            async with self._sessionmaker.begin() as session:
                await session.execute(
                    update(Memory)
                    .where(Memory.id.in_(ids), Memory.state != MemoryState.DELETED.value)
                    .values(state=MemoryState.INDEXED.value, embedding_model=self._embedder.model_name)
                )
            if progress is not None:
                progress(len(memories))
        return len(ordered)

    async def resummarize(
        self, personality_id: int, *, progress: ProgressCallback | None = None, batch: int = 32
    ) -> FormationReport:
        """Re-summarize verbatim, cleaned or extractive memories with the personality's summarizer.

        Resumable: each batch is committed, and a memory the LLM summarized is not picked again.
        """
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .where(Personality.id == personality_id)
                .options(
                    selectinload(Personality.summarizer_llm_config),
                    selectinload(Personality.summarizer_prompt),
                )
            )
        assert personality is not None
        if personality.memory_mode == MemoryMode.VERBATIM:
            raise InvalidInputError(
                f"{personality.name} stores memories verbatim; turn summarization on before re-summarizing."
            )
        cfg = self.summarizer_config(personality)
        if cfg is None:
            raise InvalidInputError(
                "No summarizer model is configured: set SUMMARIZER_MODEL or give the personality one."
            )
        prompt = personality.summarizer_prompt.content if personality.summarizer_prompt else None
        mode = MemoryMode(personality.memory_mode)
        report = FormationReport()
        after: uuid.UUID | None = None
        while True:
            async with self._sessionmaker() as session:
                query = select(Memory).where(
                    Memory.personality_id == personality_id,
                    Memory.state != MemoryState.DELETED.value,
                    Memory.summarizer.in_([VERBATIM, EXTRACTIVE]),
                )
                if after is not None:
                    query = query.where(Memory.id > after)
                memories = (await session.scalars(query.order_by(Memory.id).limit(batch))).all()
                sources = {m.id: await self._source_text(session, m, personality) for m in memories}
            if not memories:
                return report
            after = memories[-1].id
            results = await asyncio.gather(
                *(self._summarizer.summarize(sources[m.id], cfg=cfg, prompt=prompt) for m in memories)
            )
            improved = [(m, r) for m, r in zip(memories, results, strict=True) if not r.extractive]
            if improved:
                vectors = await self._embedder.embed([r.text for _, r in improved])
                async with self._sessionmaker.begin() as session:
                    for (memory, result), _vector in zip(improved, vectors, strict=True):
                        source = sources[memory.id]
                        misses = fidelity_misses(strip_roleplay_formatting(source), result.text)
                        keep = mode is MemoryMode.HYBRID or bool(misses)
                        await session.execute(
                            update(Memory)
                            .where(Memory.id == memory.id, Memory.state != MemoryState.DELETED.value)
                            .values(
                                mode=mode.value,
                                content=result.text,
                                content_verbatim=source if keep else None,
                                summarized=True,
                                summarizer=result.summarizer,
                                fidelity_misses=misses,
                                state=MemoryState.FORMED.value,
                                embedding_model=self._embedder.model_name,
                            )
                        )
                        report.fidelity_misses += bool(misses)
                points = [
                    _point({**_row_of(m), "content": r.text}, v)
                    for (m, r), v in zip(improved, vectors, strict=True)
                ]
                await self._index_points(points)
            report.exchanges += len(memories)
            report.memories += len(improved)
            report.extractive += len(memories) - len(improved)
            if progress is not None:
                progress(len(memories))

    async def _source_text(self, session: AsyncSession, memory: Memory, personality: Personality) -> str:
        """The exchange as it was said: kept verbatim text, else rebuilt from the message log."""
        if memory.content_verbatim:
            return memory.content_verbatim
        if memory.summarizer == VERBATIM:
            return memory.content
        messages = (
            await session.scalars(
                select(Message)
                .where(
                    Message.conversation_id == memory.conversation_id,
                    Message.external_id.in_(memory.source_message_ids),
                )
                .order_by(Message.id)
            )
        ).all()
        if not messages:
            return memory.content
        return render_lines([_logged(m) for m in messages], personality_name=personality.display_name)


def _logged(message: Message) -> LoggedMessage:
    return LoggedMessage(
        id=message.id,
        external_id=message.external_id,
        author_id=message.author_id,
        author_name=message.author_name,
        role=MessageRole(message.role),
        content=message.content,
        created_at=message.created_at,
    )


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


def _upsert_memories(rows: list[dict[str, Any]]) -> Any:  # an Insert, typed loosely for .returning()
    statement = insert(Memory).values(rows)
    excluded = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[Memory.id],
        set_={
            column: excluded[column]
            for column in (
                "mode",
                "content",
                "content_verbatim",
                "source_chars",
                "summarized",
                "summarizer",
                "fidelity_misses",
                "embedding_model",
                "state",
                "occurred_at",
            )
        }
        | {"updated_at": func.now()},
        # A forgotten memory stays forgotten, even if its messages are imported again.
        where=Memory.state != MemoryState.DELETED.value,
    )


def _row_of(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "personality_id": memory.personality_id,
        "user_id": memory.user_id,
        "guild_id": memory.guild_id,
        "channel_id": memory.channel_id,
        "is_dm": memory.is_dm,
        "occurred_at": memory.occurred_at,
        "content": memory.content,
        "fidelity_misses": list(memory.fidelity_misses),
    }


def _point(row: dict[str, Any], dense: list[float]) -> IndexPoint:
    # Facts the summary dropped stay findable by keyword: they are in the verbatim text we kept.
    keywords = row["content"] + (" " + " ".join(row["fidelity_misses"]) if row.get("fidelity_misses") else "")
    return IndexPoint(
        id=row["id"],
        dense=dense,
        sparse=encode_sparse(keywords),
        payload=MemoryPayload(
            personality_id=row["personality_id"],
            user_id=row["user_id"],
            guild_id=row["guild_id"],
            channel_id=row["channel_id"],
            is_dm=row["is_dm"],
            occurred_at=row["occurred_at"].timestamp(),
        ),
    )
