"""Long-term memory's one front door: form memories from the message log, recall them, let users steer.

A facade over the rooms where the work happens: memory.formation (forming, re-summarizing, the mode
policy, stats, steering, corrections) and memory.recall (the store of rows and index points, search,
curation, upkeep). Callers (chat, the cogs, the CLI, bench) use only this, and import the types of its
answers from here too; it takes plain ids and knows no Discord. Each method hands its work to the room
that does it. Importing and exporting have a room and a service of their own (memory.transfer)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Collection, Sequence

from memory.conversations import Venue, conversation_title
from memory.formation import corrections, forming, steering
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.corrections import MAX_CORRECTION_CHARS
from memory.formation.forming import FormationReport, MemoryFormation
from memory.formation.mode import effective_mode
from memory.formation.resummarize import resummarize
from memory.formation.stats import MemoryStats, ModeStats, fallback_line, memory_stats
from memory.formation.steering import RememberReport
from memory.formation.summarizer import ExchangeSummarizer
from memory.formation.whole_memory import WholeMemory, resolve_memory_id, short_ids, whole_memory
from memory.formation.worker import run_worker
from memory.memory_status import MemoryStatus
from memory.owners.incognito import IncognitoService
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personalities import PersonalityService
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService, fresh_mode
from memory.recall import curation, receipts, upkeep
from memory.recall.curation import BrowsedMemory, MemoryPage, personalities_remembered
from memory.recall.receipts import ReplyReceipt, UsedMemory
from memory.recall.search import RecalledMemory, recall
from memory.recall.upkeep import DriftReport
from memory.types import MemoryMode, ProgressCallback
from models import Personality

__all__ = [
    "MAX_CORRECTION_CHARS",
    "BrowsedMemory",
    "DriftReport",
    "FormationReport",
    "MemoryMode",
    "MemoryPage",
    "MemoryService",
    "MemoryStats",
    "MemoryStatus",
    "ModeStats",
    "RecalledMemory",
    "RememberReport",
    "ReplyReceipt",
    "UsedMemory",
    "Venue",
    "WholeMemory",
    "fallback_line",
]

# The most matches a search in /memory browse pages through.
BROWSE_MATCHES = 50


class MemoryService:
    """Forms, indexes, recalls and deletes long-term memories."""

    def __init__(
        self,
        formation: MemoryFormation,
        *,
        summarizer: ExchangeSummarizer,
        models: ModelConfigResolver,
        user_settings: UserSettingsService,
        incognito: IncognitoService,
        personas: PersonaService,
    ) -> None:
        # Formation writes through its store; every other room here reads and changes that same one.
        self._formation = formation
        self._store = formation.store
        self._summarizer = summarizer
        self._models = models
        # What a user's memory status reports beside the memories themselves.
        self._user_settings = user_settings
        self._incognito = incognito
        self._personas = personas

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
        """Turn every complete exchange not yet remembered (of one conversation or personality, or all)
        into memories, then index them (memory.formation.forming)."""
        return await self._formation.form_pending(
            conversation_id=conversation_id,
            personality_id=personality_id,
            mode_override=mode_override,
            progress=progress,
        )

    async def run_worker(self, *, idle_seconds: float = 2.0, stop: asyncio.Event | None = None) -> None:
        """Form pending memories beside any other workers until `stop` is set (memory.formation.worker)."""
        await run_worker(self._formation, idle_seconds=idle_seconds, stop=stop)

    async def pending_message_count(
        self, personality_id: int | None = None, user_id: str | None = None
    ) -> int:
        """Messages not yet turned into memories (a user's own, when user_id is given); excluded ones
        (incognito, forgotten) never will be, so they are not counted."""
        return await forming.pending_message_count(self._store, personality_id, user_id)

    async def index_pending(self) -> int:
        """Index memories written to PostgreSQL but not yet searchable (after a crash, say)."""
        return await self._store.index_pending()

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
        for_reply: bool = False,
    ) -> list[RecalledMemory]:
        """The user's memories of this personality that best match the query, for this venue only (in a
        guild: DM memories only if the user allowed it; for a reply's prompt, none in fresh mode); see
        memory.recall.search."""
        # A query is user text: template tokens in it must not steer the search.
        return await recall(
            self._store,
            personality_id=personality_id,
            user_id=user_id,
            query=strip_chat_template_tokens(query),
            guild_id=guild_id,
            limit=limit,
            for_reply=for_reply,
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

    async def search(
        self, *, user_id: str, query: str, personality_id: int | None = None, limit: int = 5
    ) -> list[BrowsedMemory]:
        """The user's memories that best match the query, best first, across venues (/memory search)."""
        ids = await self.best_matches(
            user_id=user_id, query=query, personality_id=personality_id, limit=limit
        )
        return await self.browsed(user_id=user_id, ids=ids)

    # ------------------------------------------------------------------ user controls

    async def forget(
        self,
        *,
        user_id: str,
        personality_id: int | None = None,
        memory_ids: Sequence[uuid.UUID] | None = None,
    ) -> int:
        """Delete the user's memories (all, one personality's, or the given ids); returns how many. What
        ids forgot is recorded so it does not come back in other words; forgetting all clears those
        records (memory.formation.steering)."""
        return await steering.forget_memories(
            self._store, user_id=user_id, personality_id=personality_id, memory_ids=memory_ids
        )

    async def unform(self, *, conversation_id: int, external_ids: Collection[str], exclude: bool) -> int:
        """Forget every live memory formed from these messages' exchanges; returns how many.

        exclude: the messages are marked forgotten, never formed again; otherwise they are pending
        again and formation forms their exchanges anew (memory.formation.steering)."""
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
        """ "Forget this": forget the user's exchange of this message for good; memories removed."""
        return await steering.forget_exchange(
            self._store, message_id=message_id, channel_id=channel_id, user_id=user_id
        )

    async def set_pinned(self, *, user_id: str, memory_id: uuid.UUID, pinned: bool) -> None:
        """Pin or unpin one of the user's memories (NotFoundError when they have no such memory)."""
        await corrections.set_pinned(self._store, user_id=user_id, memory_id=memory_id, pinned=pinned)

    async def correct(self, *, user_id: str, memory_id: uuid.UUID, content: str) -> None:
        """Replace the text of one of the user's memories with their correction, re-embedded and
        re-indexed; what was said stays kept (memory.formation.corrections)."""
        await corrections.correct(self._store, user_id=user_id, memory_id=memory_id, content=content)

    async def memory_id(self, *, user_id: str, text: str) -> uuid.UUID:
        """The id of the user's memory that `text` names: its id, or a unique prefix of it."""
        return await resolve_memory_id(self._store, user_id=user_id, text=text)

    async def short_ids(self, *, user_id: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        """Each of the user's memory ids as its shortest unique prefix (8 characters at least)."""
        return await short_ids(self._store, user_id=user_id, ids=ids)

    async def whole(self, *, user_id: str, memory_id: uuid.UUID) -> WholeMemory:
        """One of the user's memories, with how it was made and where it came from."""
        return await whole_memory(self._store, user_id=user_id, memory_id=memory_id)

    async def browse(
        self, *, user_id: str, personality_id: int | None = None, offset: int = 0, limit: int = 5
    ) -> MemoryPage:
        """The user's memories (of one personality, or all), newest first, `limit` from `offset`."""
        return await curation.newest_page(
            self._store, user_id=user_id, personality_id=personality_id, offset=offset, limit=limit
        )

    async def browsed(self, *, user_id: str, ids: Sequence[uuid.UUID]) -> list[BrowsedMemory]:
        """These memories of the user, in the order given; those forgotten meanwhile (or not theirs)
        left out."""
        return await curation.memories_by_id(self._store, user_id=user_id, ids=ids)

    async def status(self, *, user_id: str, personality: Personality | None, venue: Venue) -> MemoryStatus:
        """How the user's memory behaves (with one personality, here; or with all of them): the settings
        in force and who set them, storage, pending work, incognito, the persona (/memory status)."""
        stats = await self.stats(personality_id=personality.id if personality else None, user_id=user_id)
        if personality is None:
            return MemoryStatus(
                stats=stats,
                personality=None,
                general_settings=(general := await self._user_settings.get(user_id)),
                fresh=bool(general and general.fresh),
                incognito=list(await self._incognito.current(user_id)),
                persona=await self._personas.get(user_id),
            )
        settings = await self._user_settings.for_personality(user_id, personality.id)
        mode, source = effective_mode(personality, settings)
        async with self._store.sessionmaker() as session:
            title = await conversation_title(session, personality.id, venue)
        span = await self._incognito.active(user_id, personality.id)
        return MemoryStatus(
            stats=stats,
            personality=personality,
            mode=mode,
            mode_set_by=source,
            summarizer=self._models.summarizer(personality),
            conversation_title=title,
            fresh=fresh_mode(settings),
            incognito=[span] if span else [],
            persona=await self._personas.effective(user_id, personality.id),
        )

    async def stats(self, *, personality_id: int | None = None, user_id: str | None = None) -> MemoryStats:
        """Live memories of a personality (or all), of one user (or all), by mode and summarizer."""
        stats = await memory_stats(self._store, personality_id=personality_id, user_id=user_id)
        return dataclasses.replace(stats, one_exchange_a_call=self._summarizer.pace.singles())

    async def delete_personality(
        self, personalities: PersonalityService, name: str, *, actor: str | None
    ) -> Personality:
        """Delete a personality with its conversations and memories (the owner rules apply), then
        drop its points from the index."""
        personality = await personalities.delete(name, actor=actor)
        await self.reindex(personality_id=personality.id)
        return personality

    # ------------------------------------------------------------------- maintenance

    async def lost_from_index(self) -> int:
        """How many memories PostgreSQL counts as indexed while the index holds no point at all (its
        folder deleted, a new Qdrant server): recall finds nothing until `personae reindex`."""
        return await upkeep.lost_from_index(self._store)

    async def check_drift(self, *, personality_id: int | None = None) -> DriftReport:
        """Live memories missing from the index, and index points whose memory is gone."""
        return await upkeep.check_drift(self._store, personality_id=personality_id)

    async def reindex(
        self, *, personality_id: int | None = None, progress: ProgressCallback | None = None, batch: int = 256
    ) -> int:
        """Rebuild the index from PostgreSQL, re-embedding with the current model (all of it, or one
        personality's points in place); returns memories indexed (memory.recall.upkeep)."""
        return await upkeep.reindex(
            self._store, personality_id=personality_id, progress=progress, batch=batch
        )

    # ---------------------------------------------------------------- a reply's memories

    async def record_reply_memories(
        self, *, conversation_id: int, message_id: str, memories: Sequence[RecalledMemory]
    ) -> int:
        """Record the memories that went into the reply to this message, replacing earlier ones
        (memory.recall.receipts); how many."""
        return await receipts.record_reply_memories(
            self._store, conversation_id=conversation_id, message_id=message_id, memories=memories
        )

    async def reply_receipt(
        self, *, user_id: str, message_id: str, conversation_id: int | None = None
    ) -> ReplyReceipt:
        """The memories a reply used (by the reply's id or the answered message's), for the user it
        answered only (memory.recall.receipts)."""
        return await receipts.reply_receipt(
            self._store, user_id=user_id, message_id=message_id, conversation_id=conversation_id
        )
