"""Forming memories: complete exchanges of the message log become memories, written and indexed.

One conversation at a time is claimed (an advisory lock, skipped when held, so any number of workers
share the work: see `_claim`) and formed batch by batch: the exchanges its replies completed are read
(memory.formation.pending; exchanges with a message said incognito or forgotten are only marked
done), each shaped as its user and personality chose (memory.formation.shaping:
verbatim, cleaned, or summarized by the LLM), then embedded, written and indexed. The batches run as
a pipeline (memory.formation.pipeline): the next ones are summarized and embedded while one is
written, so the LLM, the embedder and the database work overlap. A batch's rows are written and its
messages marked in one transaction; its points are indexed after it, and a crash in between leaves
them 'formed' for `index_pending`.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import BigInteger, Select, exists, func, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.formation.exchanges import Exchange
from memory.formation.mode import effective_mode
from memory.formation.pending import AwaitedReplies, mark_remembered, read_ready
from memory.formation.pipeline import BatchRead, run_pipeline
from memory.formation.progress import CountedProgress
from memory.formation.repeats import screen_batch
from memory.formation.shaping import Shaped, memory_row, shape_exchanges
from memory.formation.summarizer import ExchangeSummarizer
from memory.owners.model_configs import ModelConfigResolver
from memory.recall.store import MemoryStore, memory_points, upsert_memories
from memory.types import MemoryMode, MessageRole, ProgressCallback
from models import Conversation, Message, Personality, UserSettings

# Advisory lock keys of formation claims: this prefix plus the conversation's id (distinct below 2**32).
CLAIM_LOCK_SPACE = 0x5045_5253 << 32  # "PERS"
CLAIM_PAGE = 32  # candidate conversations read at a time


@dataclass
class FormationReport:
    exchanges: int = 0
    memories: int = 0
    skipped: int = 0
    extractive: int = 0
    # Memories whose summary dropped a key fact, carried in their text.
    fidelity_misses: int = 0
    # Messages marked done without a memory because they are excluded (incognito, forgotten).
    excluded: int = 0
    # Exchanges that reinforced a memory saying the same instead of adding one, and exchanges not
    # remembered as they say again what their user forgot (memory.formation.repeats).
    repeats: int = 0
    restating_forgotten: int = 0
    remembered_message_ids: list[str] = field(default_factory=list)
    # Extractive summaries by why (memory.formation.summarizer.FallbackReason), and a failure's words.
    fallbacks: Counter[str] = field(default_factory=Counter)
    fallback_details: dict[str, str] = field(default_factory=dict)

    def add(self, other: FormationReport) -> None:
        self.exchanges += other.exchanges
        self.memories += other.memories
        self.skipped += other.skipped
        self.extractive += other.extractive
        self.fidelity_misses += other.fidelity_misses
        self.excluded += other.excluded
        self.repeats += other.repeats
        self.restating_forgotten += other.restating_forgotten
        self.remembered_message_ids.extend(other.remembered_message_ids)
        self.fallbacks.update(other.fallbacks)
        for reason, detail in other.fallback_details.items():
            self.fallback_details.setdefault(reason, detail)

    def note_fallback(self, reason: str | None, detail: str | None) -> None:
        """Count an extractive summary by its reason (the first failure's words kept for reports)."""
        if reason is None:
            return
        self.extractive += 1
        self.fallbacks[reason] += 1
        if detail:
            self.fallback_details.setdefault(reason, detail)


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch formed: its memories and their vectors to write, the messages its write marks, its
    report so far."""

    formed: Sequence[Shaped]
    vectors: list[list[float]]
    done: list[str]
    report: FormationReport
    told: CountedProgress  # its exchanges the progress was told of as they were summarized


class MemoryFormation:
    """Turns pending messages into memories; see the module docstring for the steps."""

    def __init__(
        self,
        store: MemoryStore,
        summarizer: ExchangeSummarizer,
        models: ModelConfigResolver,
        *,
        awaited: AwaitedReplies,
        min_summarize_tokens: int,
        batch_size: int,
        batches_ahead: int,
    ) -> None:
        self._store = store
        self._summarizer = summarizer
        self._models = models
        self._min_summarize_tokens = min_summarize_tokens
        self._batch_size = batch_size  # exchanges read, summarized and written together
        # Conversations a pass of this process holds, and those another pass asked for meanwhile.
        self._held: Counter[int] = Counter()
        self._asked: set[int] = set()
        # Messages whose reply the chat service of this process is writing (see AwaitedReplies).
        self.awaited = awaited
        # Batches summarized while one is written (memory.formation.pipeline); 0: one after the other.
        self._batches_ahead = batches_ahead

    @property
    def store(self) -> MemoryStore:
        return self._store

    async def form_pending(
        self,
        *,
        conversation_id: int | None = None,
        personality_id: int | None = None,
        mode_override: MemoryMode | None = None,
        progress: ProgressCallback | None = None,
    ) -> FormationReport:
        """Turn every complete, unprocessed exchange into a memory, batch by batch, then index them.

        A pass asked for a conversation that another pass of this process holds returns at once:
        the holder looks at it again before it ends, so an exchange completed meanwhile (another
        user's reply, stored while the holder summarized) is formed by it, not left for a restart.
        When the holder is another process, its next pass or the catch-up timer forms it.
        """
        report = FormationReport()
        if conversation_id is not None and self._held[conversation_id]:
            self._asked.add(conversation_id)
            return report
        await self._store.ready()
        mine: set[int] = set()  # every conversation this pass held
        if conversation_id is not None:
            self._held[conversation_id] += 1
            mine.add(conversation_id)
        target, again = conversation_id, list[int]()
        try:
            while True:
                if await self._form_next(target, personality_id, mode_override, mine, report, progress):
                    continue
                asked = self._asked & mine
                self._asked -= asked
                if target is not None and self._held[target] > (target == conversation_id):
                    # Skipped: another pass of this process holds it, and looks again before it ends.
                    self._asked.add(target)
                    asked.discard(target)
                again.extend(sorted(asked - set(again)))
                if not again:
                    break
                target = again.pop(0)
        finally:
            if conversation_id is not None:
                self._held[conversation_id] -= 1
        await self._store.index_pending()
        return report

    async def _form_next(
        self,
        conversation_id: int | None,
        personality_id: int | None,
        mode_override: MemoryMode | None,
        mine: set[int],
        report: FormationReport,
        progress: ProgressCallback | None,
    ) -> bool:
        """Claim a conversation with exchanges ready and form them, pipelined; False when none is left.

        The claim is held (its transaction open) until every batch read under it is written or
        dropped, so no other pass reads an exchange this one summarizes. It holds the advisory lock
        and nothing else: a table it read would stay locked while the LLM summarizes, and a DDL or
        TRUNCATE waiting on it would queue this pass's own write behind it (a deadlock PostgreSQL
        cannot see). Batches are read and written in transactions of their own.
        """
        # Only replies complete exchanges: a conversation where users only wait is not read.
        has_pending = exists().where(
            Message.conversation_id == Conversation.id,
            Message.memory_processed_at.is_(None),
            Message.role == MessageRole.ASSISTANT.value,
        )
        candidates = select(Conversation.id).where(has_pending).order_by(Conversation.id)
        if conversation_id is not None:
            candidates = candidates.where(Conversation.id == conversation_id)
        if personality_id is not None:
            candidates = candidates.where(Conversation.personality_id == personality_id)
        claimed: list[int] = []
        try:
            async with self._store.sessionmaker() as claim:
                try:
                    while (
                        conversation := await _claim(claim, self._store.sessionmaker, candidates, claimed)
                    ) is not None:
                        self._held[conversation.id] += 1
                        mine.add(conversation.id)
                        read = partial(self._read_batch, conversation, mode_override, progress)
                        write = partial(self._write_batch, conversation, report, progress)
                        if await run_pipeline(read, write, ahead=self._batches_ahead):
                            break
                except BaseException:
                    # Ended by a commit all the same: it wrote nothing, and a rollback would, on a
                    # sessionmaker sharing one connection (tests), undo the batches written under it.
                    with contextlib.suppress(Exception):
                        await claim.commit()
                    raise
                await claim.commit()
        finally:
            for claimed_id in claimed:
                self._held[claimed_id] -= 1
        return conversation is not None

    async def _read_batch(
        self,
        conversation: Conversation,
        mode_override: MemoryMode | None,
        progress: ProgressCallback | None,
        in_flight: Collection[str],
    ) -> BatchRead[_Batch] | None:
        """The next batch past those in flight, its summaries to start; None when none is ready. Read
        in a session of its own: the claim's transaction holds its lock and nothing else."""
        async with self._store.sessionmaker() as session:
            grouping = await read_ready(
                session,
                conversation.id,
                limit=self._batch_size,
                awaited=self.awaited.current(),
                in_flight=in_flight,
            )
            if grouping is None:
                return None
            exchanges = grouping.exchanges
            done = [m.external_id for m in grouping.orphans]
            done.extend(m.external_id for e in exchanges for m in e.messages)
            done.extend(m.external_id for m in grouping.excluded)
            if not done:
                return None
            report = FormationReport(exchanges=len(exchanges), excluded=len(grouping.excluded))
            told = CountedProgress(progress)
            shaping: Awaitable[Sequence[Shaped]] | None = None
            if exchanges:
                personality = await session.scalar(
                    select(Personality)
                    .where(Personality.id == conversation.personality_id)
                    .options(
                        selectinload(Personality.summarizer_llm_config),
                        selectinload(Personality.summarizer_prompt),
                    )
                )
                assert personality is not None
                settings = (
                    await session.scalars(
                        select(UserSettings).where(
                            UserSettings.user_id.in_({e.user_id for e in exchanges}),
                            or_(
                                UserSettings.personality_id.is_(None),
                                UserSettings.personality_id == personality.id,
                            ),
                        )
                    )
                ).all()
                cfg = self._models.summarizer(personality)
                prompt = personality.summarizer_prompt.content if personality.summarizer_prompt else None
                chosen: list[tuple[Exchange, MemoryMode]] = []
                for exchange in exchanges:
                    user_settings = [s for s in settings if s.user_id == exchange.user_id]
                    mode, _ = effective_mode(personality, user_settings)
                    if mode is not None and mode_override is not None:
                        mode = mode_override
                    if mode is None:
                        report.skipped += 1
                        continue
                    chosen.append((exchange, mode))
                shaping = shape_exchanges(
                    chosen,
                    personality,
                    cfg,
                    prompt,
                    summarizer=self._summarizer,
                    min_summarize_tokens=self._min_summarize_tokens,
                    progress=told,
                )
            return BatchRead(frozenset(done), self._form(shaping, done, report, told))

    async def _form(
        self,
        shaping: Awaitable[Sequence[Shaped]] | None,
        done: list[str],
        report: FormationReport,
        told: CountedProgress,
    ) -> _Batch:
        """The batch shaped, then embedded: both before its write, so that a batch is embedded while
        the one before it is written and indexed (the embedder works in its threads, the write on
        the event loop and PostgreSQL), not after."""
        formed = await shaping if shaping is not None else []
        vectors = await self._store.embedder.embed([f.content for f in formed]) if formed else []
        return _Batch(formed, vectors, done, report, told)

    async def _write_batch(
        self,
        conversation: Conversation,
        report: FormationReport,
        progress: ProgressCallback | None,
        batch: _Batch,
    ) -> None:
        """Write and mark the batch in one transaction, then index it (see the module doc)."""
        batch_report = batch.report
        rows = [memory_row(conversation, f, self._store.embedding_model) for f in batch.formed]
        # What the user forgot, or said before, is not stored again (memory.formation.repeats).
        screened = await screen_batch(self._store, conversation, batch.formed, rows, batch.vectors)
        for item in screened.formed:
            batch_report.memories += 1
            batch_report.note_fallback(item.fallback, item.fallback_detail)
            batch_report.fidelity_misses += bool(item.misses)
        batch_report.repeats += screened.repeats
        batch_report.restating_forgotten += len(screened.restating)
        restating = {id(item) for item in screened.restating}
        for item in batch.formed:
            if id(item) not in restating:
                batch_report.remembered_message_ids.extend(m.external_id for m in item.exchange.user_messages)
        async with self._store.sessionmaker.begin() as session:
            written = await upsert_memories(session, screened.rows)
            await screened.apply(session, conversation.id)
            await mark_remembered(session, conversation.id, batch.done)
        # Only rows actually written are indexed: a forgotten memory's tombstone was left alone.
        kept = [
            (row, v) for row, v in zip(screened.rows, screened.vectors, strict=True) if row["id"] in written
        ]
        await self._store.index_points(*memory_points([r for r, _ in kept], [v for _, v in kept]))
        # Keyed again with the messages that said them again.
        await self._store.rewrite_points(
            sorted(i for i, again in screened.reinforced.items() if again.sources)
        )
        report.add(batch_report)
        if progress is not None and batch_report.exchanges > batch.told.count:
            progress(batch_report.exchanges - batch.told.count)


async def _claim(
    claim: AsyncSession,
    sessionmaker: async_sessionmaker[AsyncSession],
    candidates: Select[int],
    claimed: list[int],
) -> Conversation | None:
    """Lock the first candidate conversation no other pass holds, for the `claim` session's
    transaction, and add it to `claimed`; None when every candidate is held or none is left.

    The claim is an advisory lock, tried (never waited on): other passes and workers skip a claimed
    conversation and take the next. Not a lock on the conversation's row: a pass holds its claim
    while it summarizes, embeds and writes, and a row lock would make whatever updates that row (a
    new title) wait all that time, holding a connection the pass's own writes may need. The
    candidates are read in sessions of their own, so the claim locks no table.
    """
    tried: list[int] = list(claimed)
    while True:
        page = candidates.where(Conversation.id.not_in(tried)) if tried else candidates
        async with sessionmaker() as session:
            ids = list((await session.scalars(page.limit(CLAIM_PAGE))).all())
        if not ids:
            return None
        for candidate in ids:
            tried.append(candidate)
            lock = func.pg_try_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + candidate, BigInteger))
            if await claim.scalar(select(lock)):
                async with sessionmaker() as session:
                    conversation = await session.get(Conversation, candidate)
                if conversation is not None:  # else deleted meanwhile
                    claimed.append(candidate)
                    return conversation


async def pending_message_count(
    store: MemoryStore, personality_id: int | None = None, user_id: str | None = None
) -> int:
    """Messages not yet turned into memories (a user's own, when user_id is given); excluded ones
    (incognito, forgotten) never will be, so they are not counted."""
    async with store.sessionmaker() as session:
        query = select(func.count(Message.id)).where(
            Message.memory_processed_at.is_(None), Message.memory_excluded.is_(None)
        )
        if personality_id is not None:
            query = query.join(Conversation).where(Conversation.personality_id == personality_id)
        if user_id is not None:
            query = query.where(Message.author_id == user_id)
        return int(await session.scalar(query) or 0)
