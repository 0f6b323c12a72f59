"""What a user changes of one of their memories: pinning it, and correcting its text.

A pinned memory keeps its verbatim words: pinning a summary whose exchange was not kept word for word
stores the exchange beside it (rebuilt from the log), and re-summarizing keeps them too
(memory.formation.resummarize); a pin also lets back a memory silenced for restating a forgotten
claim (the user wants it). A correction replaces the memory's text, which is embedded and indexed
anew (keyed by the corrected words, memory.recall.store), while `content_verbatim` keeps what was
actually said; what the memory claimed before is recorded as corrected (memory.formation.forgotten),
with what is right, and every other memory of the user and personality stating it is superseded.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from memory.errors import InvalidInputError, NotFoundError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.forgotten import CORRECTED_CLAIM, memory_claims, remember_claims
from memory.formation.resummarize import source_text
from memory.formation.shaping import VERBATIM
from memory.recall.store import MemoryStore, memory_point, point_fields
from memory.types import MemoryState
from models import Memory, Personality

# Discord's text inputs hold at most 4000 characters: the longest correction a user can type.
MAX_CORRECTION_CHARS = 4000


async def pin_rows(session: AsyncSession, *conditions: ColumnElement[bool]) -> list[uuid.UUID]:
    """Pin the live memories matching the conditions, their verbatim words kept; their ids."""
    memories = (
        await session.scalars(
            select(Memory).where(Memory.state != MemoryState.DELETED.value, *conditions).with_for_update()
        )
    ).all()
    for memory in memories:
        if memory.content_verbatim is None and memory.summarizer != VERBATIM:
            memory.content_verbatim = await _said(session, memory)
        memory.pinned = True
        memory.forgotten_claim_id = None
        memory.superseded_at = None
    return [m.id for m in memories]


async def _said(session: AsyncSession, memory: Memory) -> str:
    """The memory's exchange as it was said (resummarize.source_text)."""
    personality = await session.get(Personality, memory.personality_id)
    assert personality is not None  # deleting a personality deletes its memories
    return await source_text(session, memory, personality)


async def set_pinned(store: MemoryStore, *, user_id: str, memory_id: uuid.UUID, pinned: bool) -> None:
    """Pin or unpin one of the user's memories (NotFoundError when they have no such memory)."""
    async with store.sessionmaker.begin() as session:
        owned = (Memory.id == memory_id, Memory.user_id == user_id)
        if pinned:
            found = bool(await pin_rows(session, *owned))
        else:
            found = (
                await session.scalar(
                    update(Memory)
                    .where(*owned, Memory.state != MemoryState.DELETED.value)
                    .values(pinned=False)
                    .returning(Memory.id)
                )
            ) is not None
    if not found:
        raise NotFoundError(f"You have no memory with id {memory_id}.")


async def correct(store: MemoryStore, *, user_id: str, memory_id: uuid.UUID, content: str) -> None:
    """Replace the text of one of the user's memories with their correction, then re-embed and
    re-index it (see the module docstring)."""
    # It goes into prompts as it is: template tokens in it must not steer the model.
    content = strip_chat_template_tokens(content).strip()
    if not content:
        raise InvalidInputError("A memory can't be empty; use Forget to delete it.")
    if len(content) > MAX_CORRECTION_CHARS:
        raise InvalidInputError(f"A memory can be at most {MAX_CORRECTION_CHARS} characters.")
    # Embedded first: no row stays locked while the model runs.
    [vector] = await store.embedder.embed([content])
    async with store.sessionmaker.begin() as session:
        memory = await session.scalar(
            select(Memory)
            .where(
                Memory.id == memory_id, Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value
            )
            .with_for_update()
        )
        if memory is None:
            raise NotFoundError(f"You have no memory with id {memory_id}.")
        claims = await memory_claims(session, Memory.id == memory.id)
        if memory.content_verbatim is None:
            # What was said: the old text of a verbatim memory, the exchange itself for a summary.
            memory.content_verbatim = await _said(session, memory)
        memory.content = content
        memory.edited_at = datetime.now(UTC)
        # 'formed' until the new point is written: a crash in between leaves it for index_pending.
        memory.state = MemoryState.FORMED.value
        memory.embedding_model = store.embedding_model
        fields = point_fields(memory)
        await remember_claims(
            store, session, claims, kind=CORRECTED_CLAIM, corrected_to={memory.id: (content, vector)}
        )
    await store.index_points([memory_point(fields, vector)])
