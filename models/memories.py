"""The long-term memories' tables: the memories, the claims their users forgot or corrected, and
which memories went into each reply's prompt."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import REAL, BigInteger, CheckConstraint, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base
from models.columns import CreatedAt, ExternalId, FalseByDefault, IntId, PersonalityId, Timestamp, UpdatedAt


class Memory(Base):
    """One long-term memory; its id (derived from personality and sources) is also its index point id."""

    __tablename__ = "memories"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    personality_id: Mapped[PersonalityId]
    user_id: Mapped[ExternalId]
    guild_id: Mapped[ExternalId | None]
    channel_id: Mapped[ExternalId | None]
    is_dm: Mapped[FalseByDefault]
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    mode: Mapped[str] = mapped_column(String(20))
    content: Mapped[str] = mapped_column(Text)
    content_verbatim: Mapped[str | None] = mapped_column(Text)
    source_chars: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    summarized: Mapped[FalseByDefault]
    summarizer: Mapped[str] = mapped_column(String(200), server_default="verbatim")
    # Why the summary is extractive, when it is (memory.formation.summarizer.FallbackReason).
    summary_fallback: Mapped[str | None] = mapped_column(String(20))
    source_message_ids: Mapped[list[str]] = mapped_column(ARRAY(String(64)))
    occurred_at: Mapped[Timestamp]
    embedding_model: Mapped[str | None] = mapped_column(String(200))
    fidelity_misses: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    state: Mapped[str] = mapped_column(String(12), server_default="formed")
    # Pinned by its user ("Remember this", /memory browse): recalled ahead of others when relevant,
    # and never replaced by a summary without its verbatim text.
    pinned: Mapped[FalseByDefault]
    # Set when the user corrected the text; content_verbatim keeps what was actually said.
    edited_at: Mapped[Timestamp | None]
    # How often the user said what it says (a repeat reinforces it instead of adding a row,
    # memory.formation.repeats), and when they last said it (NULL: only when it was formed).
    times_said: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    last_said_at: Mapped[Timestamp | None]
    # The memory this one repeats, said in another conversation: recall shows one of the two.
    repeat_of: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="SET NULL")
    )
    # The claim it states, forgotten or corrected, and since when: kept, but never recalled.
    forgotten_claim_id: Mapped[int | None] = mapped_column(
        ForeignKey("forgotten_claims.id", ondelete="SET NULL")
    )
    superseded_at: Mapped[Timestamp | None]
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (
        CheckConstraint("mode IN ('verbatim', 'summarized', 'hybrid')", name="mode"),
        CheckConstraint("state IN ('formed', 'indexed', 'deleted', 'set_aside')", name="state"),
        CheckConstraint(
            "summary_fallback IN ('no_model', 'config', 'unreachable', 'refused', 'invented', "
            "'other_user', 'unparseable', 'timeout', 'off_exchange', 'cut', 'not_smaller', "
            "'misattributed')",
            name="summary_fallback",
        ),
        # The owner's memories, and within them one conversation's in time order: recall's neighbours
        # of a hit are read by this index, not by a scan of a heavy user's every memory.
        Index("ix_memories_owner_thread", "personality_id", "user_id", "conversation_id", "occurred_at"),
        Index("ix_memories_state", "state", postgresql_where=text("state <> 'indexed'")),
    )


class ForgottenClaim(Base):
    """What a user forgot or corrected of their memories of a personality: the removed text's embedding
    and key facts (never the text), so that it does not come back in other words
    (memory.formation.forgotten). Cleared with all of the user's memories of the personality."""

    __tablename__ = "forgotten_claims"

    id: Mapped[IntId]
    personality_id: Mapped[PersonalityId]
    user_id: Mapped[ExternalId]
    # The memory it was removed from (its tombstone, or the corrected memory): no foreign key, as
    # a memory re-formed from the same messages has the same id.
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    kind: Mapped[str] = mapped_column(String(12))
    embedding: Mapped[list[float]] = mapped_column(ARRAY(REAL))
    embedding_model: Mapped[str] = mapped_column(String(200))
    # Its key facts, the words it holds and those it negates (memory.formation.restatements).
    facts: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # A correction's embedding: a text closer to it than to the claim repeats the correction.
    corrected_to: Mapped[list[float] | None] = mapped_column(ARRAY(REAL))
    corrected_text: Mapped[str | None] = mapped_column(Text)  # what is right (None: forgotten)
    restated_at: Mapped[Timestamp | None]  # the user said it again: it holds nothing back since
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint("kind IN ('forgotten', 'corrected')", name="kind"),
        Index("ix_forgotten_claims_owner", "personality_id", "user_id"),
    )


class ReplyMemory(Base):
    """A long-term memory that went into the prompt of a reply (its receipt), by the message answered:
    a regenerated reply's memories replace the old ones. No foreign key on the memory: one re-formed
    from the same messages keeps its id, and a forgotten one is left out when read."""

    __tablename__ = "reply_memories"

    answered_message_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer)
    # pinned, rank, or context (said just around a recalled memory, and recalled with it).
    reason: Mapped[str] = mapped_column(String(8))

    __table_args__ = (CheckConstraint("reason IN ('pinned', 'rank', 'context')", name="reason"),)
