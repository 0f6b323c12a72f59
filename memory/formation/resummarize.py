"""Re-summarizing: memories kept verbatim or extractive get the personality's LLM summary.

For a personality that turned summarization on, or whose summarizer was down when its memories
formed. Resumable: each batch is committed, and a memory the LLM summarized is not picked again.
The summary carries the facts it dropped, as formation's do (memory.formation.shaping). A memory its
user pinned keeps its verbatim words beside the summary; one its user corrected is left as they
wrote it. A memory whose summary the model could not make (or made wrong) is left as it was, and
counted by reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import case, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from memory.conversations import LoggedMessage
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens, strip_roleplay_formatting
from memory.formation.exchanges import render_lines
from memory.formation.forming import FormationReport
from memory.formation.progress import CountedProgress
from memory.formation.shaping import VERBATIM, memory_text
from memory.formation.summarizer import EXTRACTIVE, ExchangeSummarizer, ExchangeText
from memory.owners.model_configs import ModelConfigResolver
from memory.recall.store import MemoryStore, memory_point, point_fields
from memory.types import MemoryMode, MemoryState, ProgressCallback
from models import Memory, Message, Personality


async def resummarize(
    store: MemoryStore,
    summarizer: ExchangeSummarizer,
    models: ModelConfigResolver,
    personality_id: int,
    *,
    progress: ProgressCallback | None = None,
    batch: int = 32,
) -> FormationReport:
    """Re-summarize the personality's verbatim, cleaned or extractive memories with its summarizer."""
    async with store.sessionmaker() as session:
        personality = await session.scalar(
            select(Personality)
            .where(Personality.id == personality_id)
            .options(
                selectinload(Personality.summarizer_llm_config), selectinload(Personality.summarizer_prompt)
            )
        )
    assert personality is not None
    if personality.memory_mode == MemoryMode.VERBATIM:
        raise InvalidInputError(
            f"{personality.name} stores memories verbatim; turn summarization on before re-summarizing."
        )
    cfg = models.summarizer(personality)
    if cfg is None:
        raise InvalidInputError(
            "No summarizer model is configured: set SUMMARIZER_MODEL or give the personality one."
        )
    prompt = personality.summarizer_prompt.content if personality.summarizer_prompt else None
    mode = MemoryMode(personality.memory_mode)
    report = FormationReport()
    after: uuid.UUID | None = None
    while True:
        async with store.sessionmaker() as session:
            query = select(Memory).where(
                Memory.personality_id == personality_id,
                Memory.state != MemoryState.DELETED.value,
                Memory.summarizer.in_([VERBATIM, EXTRACTIVE]),
                Memory.edited_at.is_(None),
            )
            if after is not None:
                query = query.where(Memory.id > after)
            memories = (await session.scalars(query.order_by(Memory.id).limit(batch))).all()
            sources = {m.id: await source_text(session, m, personality) for m in memories}
        if not memories:
            return report
        after = memories[-1].id
        names = (personality.display_name,)
        told = CountedProgress(progress)  # moved as each call settles its memories
        texts = [ExchangeText(sources[m.id], names=names) for m in memories]
        results = await summarizer.summarize_exchanges(texts, cfg=cfg, prompt=prompt, progress=told)
        improved = []
        for memory, result in zip(memories, results, strict=True):
            if result.reason is None:
                cleaned = strip_roleplay_formatting(strip_chat_template_tokens(sources[memory.id]))
                improved.append((memory, *memory_text(cleaned, result.text, names=names)))
            else:
                report.note_fallback(result.reason.value, result.detail)
        if improved:
            vectors = await store.embedder.embed([content for _, content, _ in improved])
            written: set[uuid.UUID] = set()
            async with store.sessionmaker.begin() as session:
                for memory, content, misses in improved:
                    source = sources[memory.id]
                    keep = mode is MemoryMode.HYBRID
                    updated = await session.scalar(
                        update(Memory)
                        .where(
                            Memory.id == memory.id,
                            Memory.state != MemoryState.DELETED.value,
                            # Corrected meanwhile: the user's words stay.
                            Memory.edited_at.is_(None),
                        )
                        .values(
                            mode=mode.value,
                            content=content,
                            # Pinned (even since it was read): its words are kept beside the summary.
                            content_verbatim=source
                            if keep
                            else case((Memory.pinned, literal(source)), else_=None),
                            summarized=True,
                            summarizer=cfg.model,
                            summary_fallback=None,
                            fidelity_misses=misses,
                            state=MemoryState.FORMED.value,
                            embedding_model=store.embedding_model,
                        )
                        .returning(Memory.id)
                    )
                    if updated is not None:
                        written.add(updated)
                        report.fidelity_misses += bool(misses)
            await store.index_points(
                [
                    memory_point({**point_fields(m), "content": content}, v)
                    for (m, content, _), v in zip(improved, vectors, strict=True)
                    if m.id in written
                ]
            )
        report.exchanges += len(memories)
        report.memories += len(improved)
        if progress is not None and len(memories) > told.count:
            progress(len(memories) - told.count)


async def source_messages(session: AsyncSession, memory: Memory) -> Sequence[Message]:
    """The logged messages a memory was formed from, in the order they were said."""
    return (
        await session.scalars(
            select(Message)
            .where(
                Message.conversation_id == memory.conversation_id,
                Message.external_id.in_(memory.source_message_ids),
            )
            .order_by(Message.id)
        )
    ).all()


async def source_text(session: AsyncSession, memory: Memory, personality: Personality) -> str:
    """The exchange as it was said: kept verbatim text, else rebuilt from the message log."""
    if memory.content_verbatim:
        return memory.content_verbatim
    if memory.summarizer == VERBATIM:
        return memory.content
    messages = await source_messages(session, memory)
    if not messages:
        return memory.content
    return render_lines([LoggedMessage.of(m) for m in messages], personality_name=personality.display_name)
