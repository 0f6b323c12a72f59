"""Long-term memory's one front door: form memories from the message log, recall them, let users steer.

A thin facade over the rooms where the work happens: memory.formation (forming, re-summarizing, the
mode policy, stats) and memory.recall (the store of rows and index points, search, upkeep). Callers
(chat, the cogs, the CLI, bench) use only this; it takes plain ids and knows no Discord.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.formation import steering
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.corrections import MAX_CORRECTION_CHARS, correct, set_pinned
from memory.formation.forming import FormationReport, MemoryFormation, pending_message_count
from memory.formation.resummarize import resummarize
from memory.formation.stats import MemoryStats, ModeStats, memory_stats
from memory.formation.steering import RememberReport
from memory.formation.summarizer import ExchangeSummarizer
from memory.owners.model_configs import ModelConfigResolver
from memory.recall.curation import (
    BrowsedMemory,
    MemoryPage,
    memories_by_id,
    newest_page,
    personalities_remembered,
)
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.search import RecalledMemory, recall
from memory.recall.store import MemoryStore
from memory.recall.upkeep import DriftReport, check_drift, lost_from_index, reindex
from memory.types import MemoryMode, ProgressCallback

__all__ = [
    "MAX_CORRECTION_CHARS",
    "BrowsedMemory",
    "DriftReport",
    "FormationReport",
    "MemoryPage",
    "MemoryService",
    "MemoryStats",
    "ModeStats",
    "RecalledMemory",
    "RememberReport",
]

# The most matches a search in /memory browse pages through.
BROWSE_MATCHES = 50


class MemoryService:
    """Forms, indexes, recalls and deletes long-term memories."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        index: VectorIndex,
        embedder: Embedder,
        summarizer: ExchangeSummarizer,
        models: ModelConfigResolver,
        min_summarize_tokens: int = 40,
        batch_size: int = 64,
    ) -> None:
        self._store = MemoryStore(sessionmaker, index, embedder)
        self._summarizer = summarizer
        self._models = models
        self._formation = MemoryFormation(
            self._store,
            summarizer,
            models,
            min_summarize_tokens=min_summarize_tokens,
            batch_size=batch_size,
        )

    @property
    def formation(self) -> MemoryFormation:
        """The formation pipeline itself, for the importer and workers (which only form)."""
        return self._formation

    @property
    def embedding_model(self) -> str:
        return self._store.embedding_model

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
        return await self._formation.form_pending(
            conversation_id=conversation_id,
            personality_id=personality_id,
            mode_override=mode_override,
            progress=progress,
        )

    async def pending_message_count(
        self, personality_id: int | None = None, user_id: str | None = None
    ) -> int:
        """Messages not yet turned into memories (a user's own, when user_id is given)."""
        return await pending_message_count(self._store, personality_id, user_id)

    async def index_pending(self, *, batch: int = 256) -> int:
        """Index memories written to Postgres but not yet searchable (after a crash, say)."""
        return await self._store.index_pending(batch=batch)

    async def resummarize(
        self, personality_id: int, *, progress: ProgressCallback | None = None, batch: int = 32
    ) -> FormationReport:
        """Re-summarize verbatim, cleaned or extractive memories with the personality's summarizer."""
        return await resummarize(
            self._store, self._summarizer, self._models, personality_id, progress=progress, batch=batch
        )

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
        return await recall(
            self._store,
            personality_id=personality_id,
            user_id=user_id,
            # A query is user text: template tokens in it must not steer the search.
            query=strip_chat_template_tokens(query),
            guild_id=guild_id,
            limit=limit,
        )

    # ------------------------------------------------------------------ user controls

    async def forget(
        self,
        *,
        user_id: str,
        personality_id: int | None = None,
        memory_ids: Sequence[uuid.UUID] | None = None,
    ) -> int:
        """Delete the user's memories (all, one personality's, or the given ids); returns how many."""
        return await self._store.forget(user_id=user_id, personality_id=personality_id, memory_ids=memory_ids)

    async def unform(self, *, conversation_id: int, external_ids: Collection[str], exclude: bool) -> int:
        """Forget every memory formed from these messages' exchanges; returns how many.

        exclude=True: the exchanges' messages are marked forgotten (and processed), never formed again.
        exclude=False: they are pending again, for formation to form them anew (a regenerated reply).
        """
        return await steering.unform(
            self._store, conversation_id=conversation_id, external_ids=external_ids, exclude=exclude
        )

    async def remember_message(
        self, *, message_id: str, channel_id: str | None, user_id: str
    ) -> RememberReport:
        """ "Remember this": form the user's exchange of this logged message now and pin its memory.

        NotFoundError for a message never logged, PermissionDeniedError for someone else's exchange.
        """
        return await steering.remember(
            self._store,
            lambda conversation_id: self.form_pending(conversation_id=conversation_id),
            message_id=message_id,
            channel_id=channel_id,
            user_id=user_id,
        )

    async def forget_message(self, *, message_id: str, channel_id: str | None, user_id: str) -> int:
        """ "Forget this": forget the user's exchange of this logged message for good; memories deleted."""
        return await steering.forget_exchange(
            self._store, message_id=message_id, channel_id=channel_id, user_id=user_id
        )

    async def set_pinned(self, *, user_id: str, memory_id: uuid.UUID, pinned: bool) -> None:
        """Pin (recalled first when relevant, verbatim words kept) or unpin one of the user's memories."""
        await set_pinned(self._store, user_id=user_id, memory_id=memory_id, pinned=pinned)

    async def correct(self, *, user_id: str, memory_id: uuid.UUID, content: str) -> None:
        """Replace one of the user's memories with their corrected text, re-indexed; what was said stays."""
        # It goes into prompts as it is: template tokens in it must not steer the model.
        await correct(
            self._store, user_id=user_id, memory_id=memory_id, content=strip_chat_template_tokens(content)
        )

    async def browse(
        self, *, user_id: str, personality_id: int | None = None, offset: int = 0, limit: int = 5
    ) -> MemoryPage:
        """A page of the user's memories (of one personality, or all), newest first."""
        return await newest_page(
            self._store, user_id=user_id, personality_id=personality_id, offset=offset, limit=limit
        )

    async def best_matches(
        self, *, user_id: str, query: str, personality_id: int | None = None, limit: int = BROWSE_MATCHES
    ) -> list[uuid.UUID]:
        """The ids of the user's memories that best match the query, across venues (their own search)."""
        targets = (
            [personality_id]
            if personality_id is not None
            else await personalities_remembered(self._store, user_id=user_id)
        )
        found = [
            m
            for target in targets
            for m in await self.recall(personality_id=target, user_id=user_id, query=query, limit=limit)
        ]
        found.sort(key=lambda m: -m.score)
        return [m.id for m in found[:limit]]

    async def browsed(self, *, user_id: str, ids: Sequence[uuid.UUID]) -> list[BrowsedMemory]:
        """These memories of the user as /memory browse shows them, in this order (forgotten ones gone)."""
        return await memories_by_id(self._store, user_id=user_id, ids=ids)

    async def stats(self, *, personality_id: int | None = None, user_id: str | None = None) -> MemoryStats:
        """Memories per mode and summarizer, storage saved, and what still waits."""
        return await memory_stats(self._store, personality_id=personality_id, user_id=user_id)

    # ------------------------------------------------------------------- maintenance

    async def lost_from_index(self) -> int:
        """Memories stored as indexed while the index is empty (see upkeep.lost_from_index)."""
        return await lost_from_index(self._store)

    async def check_drift(self, *, personality_id: int | None = None) -> DriftReport:
        """Live memories missing from the index, and index points whose memory is gone."""
        return await check_drift(self._store, personality_id=personality_id)

    async def reindex(
        self, *, personality_id: int | None = None, progress: ProgressCallback | None = None, batch: int = 256
    ) -> int:
        """Rebuild the index from Postgres (re-embedding with the current model); returns memories indexed."""
        return await reindex(self._store, personality_id=personality_id, progress=progress, batch=batch)
