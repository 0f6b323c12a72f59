"""Long-term memory's one front door: form memories from the message log, recall them, let users steer.

A thin facade over the rooms where the work happens: memory.formation (forming, re-summarizing, the
mode policy, stats, steering, corrections) and memory.recall (the store of rows and index points,
search, curation, upkeep). Callers (chat, the cogs, the CLI, bench) use only this; it takes plain ids
and knows no Discord. Most of its methods are a room's function with the service's store (or its
formation pipeline) bound as the first argument: their signature and docstring are written once,
where the work is done. Methods written out here add something: the user text they clean, the parts
they pass, the rooms they combine.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.formation import corrections, forming, steering
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.corrections import MAX_CORRECTION_CHARS
from memory.formation.forming import FormationReport, MemoryFormation
from memory.formation.resummarize import resummarize
from memory.formation.stats import MemoryStats, ModeStats, memory_stats
from memory.formation.steering import RememberReport
from memory.formation.summarizer import ExchangeSummarizer
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personalities import PersonalityService
from memory.recall import curation, upkeep
from memory.recall.curation import BrowsedMemory, MemoryPage, personalities_remembered
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.search import RecalledMemory, recall
from memory.recall.store import MemoryStore
from memory.recall.upkeep import DriftReport
from memory.types import ProgressCallback
from models import Personality

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

Part = TypeVar("Part")
P = ParamSpec("P")
R = TypeVar("R")


class _Bound(Generic[Part, P, R]):
    """A facade method that is `fn` called with one part of the service (its store, its formation)
    first: `service.name(...)` is `fn(part, ...)`, each keyword argument named in `cleaned` passed
    through its cleaner first."""

    def __init__(
        self,
        part: Callable[[MemoryService], Part],
        fn: Callable[Concatenate[Part, P], R],
        cleaned: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        self._part = part
        self._fn = fn
        self._cleaned = dict(cleaned or {})
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, service: None, owner: type[MemoryService]) -> _Bound[Part, P, R]: ...

    @overload
    def __get__(self, service: MemoryService, owner: type[MemoryService]) -> Callable[P, R]: ...

    def __get__(
        self, service: MemoryService | None, owner: type[MemoryService]
    ) -> _Bound[Part, P, R] | Callable[P, R]:
        if service is None:
            return self
        part, fn, cleaned = self._part(service), self._fn, self._cleaned

        def bound(*args: P.args, **kwargs: P.kwargs) -> R:
            for name, clean in cleaned.items():
                if name in kwargs:
                    kwargs[name] = clean(kwargs[name])
            return fn(part, *args, **kwargs)

        bound.__doc__ = fn.__doc__
        return bound


def _on_store(
    fn: Callable[Concatenate[MemoryStore, P], R], cleaned: Mapping[str, Callable[[Any], Any]] | None = None
) -> _Bound[MemoryStore, P, R]:
    return _Bound(lambda service: service._store, fn, cleaned)


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

    form_pending = _Bound(lambda service: service._formation, MemoryFormation.form_pending)
    pending_message_count = _on_store(forming.pending_message_count)
    index_pending = _on_store(MemoryStore.index_pending)

    async def resummarize(
        self, personality_id: int, *, progress: ProgressCallback | None = None, batch: int = 32
    ) -> FormationReport:
        """Re-summarize verbatim, cleaned or extractive memories with the personality's summarizer."""
        return await resummarize(
            self._store, self._summarizer, self._models, personality_id, progress=progress, batch=batch
        )

    # -------------------------------------------------------------------------- recall

    # A query is user text: template tokens in it must not steer the search.
    recall = _on_store(recall, {"query": strip_chat_template_tokens})

    # ------------------------------------------------------------------ user controls

    forget = _on_store(MemoryStore.forget)
    unform = _on_store(steering.unform)
    forget_message = _on_store(steering.forget_exchange)
    set_pinned = _on_store(corrections.set_pinned)
    correct = _on_store(corrections.correct)
    browse = _on_store(curation.newest_page)
    browsed = _on_store(curation.memories_by_id)
    stats = _on_store(memory_stats)

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

    async def delete_personality(
        self, personalities: PersonalityService, name: str, *, actor: str | None
    ) -> Personality:
        """Delete a personality with its conversations and memories (the owner rules apply), then
        drop its points from the index."""
        personality = await personalities.delete(name, actor=actor)
        await self.reindex(personality_id=personality.id)
        return personality

    # ------------------------------------------------------------------- maintenance

    lost_from_index = _on_store(upkeep.lost_from_index)
    check_drift = _on_store(upkeep.check_drift)
    reindex = _on_store(upkeep.reindex)
