"""The schema: Postgres is the source of truth for everything, memories included (their tables:
memories.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models.base import Base
from models.columns import (
    BigId,
    ConversationId,
    CreatedAt,
    ExternalId,
    FalseByDefault,
    IntId,
    PersonalityId,
    Timestamp,
    UpdatedAt,
)


class LLMConfig(Base):
    """A named LLM endpoint made by a bot admin; keys live in the environment, never in the database."""

    __tablename__ = "llm_configs"

    id: Mapped[IntId]
    name: Mapped[str] = mapped_column(String(100), unique=True)
    model: Mapped[str] = mapped_column(String(200))
    api_base: Mapped[str | None] = mapped_column(String(500))
    api_key_env: Mapped[str | None] = mapped_column(String(100))
    temperature: Mapped[float] = mapped_column(Float, server_default=text("0.7"))
    max_tokens: Mapped[int] = mapped_column(Integer, server_default=text("512"))
    timeout: Mapped[float] = mapped_column(Float, server_default=text("60"))
    context_window: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint("temperature >= 0 AND temperature <= 2", name="temperature_range"),
        CheckConstraint("max_tokens > 0", name="max_tokens_positive"),
        CheckConstraint("timeout > 0", name="timeout_positive"),
    )


class SystemPrompt(Base):
    __tablename__ = "system_prompts"

    id: Mapped[IntId]
    name: Mapped[str] = mapped_column(String(100), unique=True)
    prompt_type: Mapped[str] = mapped_column(String(20), server_default="personality", index=True)
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (
        CheckConstraint("prompt_type IN ('personality', 'summarizer', 'system')", name="prompt_type"),
    )


class Personality(Base):
    __tablename__ = "personalities"

    id: Mapped[IntId]
    name: Mapped[str] = mapped_column(String(64), unique=True)
    display_name: Mapped[str] = mapped_column(String(80))
    avatar_url: Mapped[str | None] = mapped_column(String(500))
    owner_id: Mapped[ExternalId | None] = mapped_column(index=True)
    system_prompt: Mapped[str] = mapped_column(Text, server_default="")
    # A personality uses either an admin-made config or a plain allow-listed model string.
    chat_llm_config_id: Mapped[int | None] = mapped_column(ForeignKey("llm_configs.id", ondelete="SET NULL"))
    chat_model: Mapped[str | None] = mapped_column(String(200))
    memory_enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    memory_mode: Mapped[str] = mapped_column(String(20), server_default="verbatim")
    summarizer_llm_config_id: Mapped[int | None] = mapped_column(
        ForeignKey("llm_configs.id", ondelete="SET NULL")
    )
    summarizer_model: Mapped[str | None] = mapped_column(String(200))
    summarizer_prompt_id: Mapped[int | None] = mapped_column(
        ForeignKey("system_prompts.id", ondelete="SET NULL")
    )
    # What a character card brought that has no column of its own (description, scenario, first
    # message, example messages, creator notes, tags...), kept so the card exports back whole.
    card: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    chat_llm_config: Mapped[LLMConfig | None] = relationship(foreign_keys=[chat_llm_config_id])
    summarizer_llm_config: Mapped[LLMConfig | None] = relationship(foreign_keys=[summarizer_llm_config_id])
    summarizer_prompt: Mapped[SystemPrompt | None] = relationship()

    __table_args__ = (
        CheckConstraint("memory_mode IN ('verbatim', 'summarized', 'hybrid')", name="memory_mode"),
        CheckConstraint("name ~ '^[a-z0-9][a-z0-9_-]*$'", name="name_is_slug"),
    )


class UserSettings(Base):
    """A user's own memory preferences: global (personality_id NULL) or for one personality."""

    __tablename__ = "user_settings"

    id: Mapped[IntId]
    user_id: Mapped[ExternalId]
    personality_id: Mapped[PersonalityId | None]
    # NULL = inherit (the global row, then the personality).
    memory_enabled: Mapped[bool | None] = mapped_column(Boolean)
    summarization: Mapped[str] = mapped_column(String(20), server_default="default")
    allow_dm_recall_in_guilds: Mapped[FalseByDefault]
    # Fresh mode: replies use none of the user's long-term memories (they still form). NULL = inherit.
    fresh: Mapped[bool | None] = mapped_column(Boolean)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (
        CheckConstraint("summarization IN ('default', 'enabled', 'disabled')", name="summarization"),
        # Two partial indexes instead of NULLS NOT DISTINCT, which needs PostgreSQL 15.
        Index(
            "uq_user_settings_global",
            "user_id",
            unique=True,
            postgresql_where=text("personality_id IS NULL"),
        ),
        Index(
            "uq_user_settings_personality",
            "user_id",
            "personality_id",
            unique=True,
            postgresql_where=text("personality_id IS NOT NULL"),
        ),
    )


class Conversation(Base):
    """One personality in one venue: a channel (shared by its users) or a user's DM."""

    __tablename__ = "conversations"

    id: Mapped[BigId]
    personality_id: Mapped[PersonalityId]
    venue_key: Mapped[str] = mapped_column(String(160))
    guild_id: Mapped[ExternalId | None]
    channel_id: Mapped[ExternalId | None]
    is_dm: Mapped[FalseByDefault]
    title: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (UniqueConstraint("personality_id", "venue_key"),)


class Message(Base):
    """The log: every user message and every reply, stored before anything acts on it."""

    __tablename__ = "messages"

    id: Mapped[BigId]
    conversation_id: Mapped[ConversationId]
    external_id: Mapped[ExternalId]
    author_id: Mapped[ExternalId]
    author_name: Mapped[str | None] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(12))
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[CreatedAt]
    token_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # Set once the exchange this message belongs to became a memory (or was skipped by settings):
    # pending memory work is derived from the NULLs here, so nothing is lost across crashes.
    memory_processed_at: Mapped[Timestamp | None]
    # A reply's link to the user message it answers (in the same conversation): exchanges are built
    # from it, so in a shared channel each reply is remembered with the one who was answered.
    # NULL for user messages, and for a reply whose user message is gone.
    reply_to_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("messages.id", ondelete="SET NULL"), index=True
    )
    # Why this message must never become a memory: said incognito, its exchange forgotten ("Forget
    # this"), or refused (over the flood limit, never answered). Formation skips the whole exchange.
    memory_excluded: Mapped[str | None] = mapped_column(String(12))

    __table_args__ = (
        UniqueConstraint("conversation_id", "external_id"),
        CheckConstraint("role IN ('user', 'assistant')", name="role"),
        CheckConstraint("memory_excluded IN ('incognito', 'forgotten', 'refused')", name="memory_excluded"),
        Index("ix_messages_conversation_id_id", "conversation_id", "id"),
        Index(
            "ix_messages_memory_pending",
            "conversation_id",
            "id",
            postgresql_where=text("memory_processed_at IS NULL"),
        ),
    )


class Summary(Base):
    """A rolling summary of a conversation, covering the messages first..last (ids in `messages`)."""

    __tablename__ = "summaries"

    id: Mapped[BigId]
    conversation_id: Mapped[ConversationId]
    content: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    first_message_id: Mapped[int] = mapped_column(BigInteger)
    last_message_id: Mapped[int] = mapped_column(BigInteger)
    message_count: Mapped[int] = mapped_column(Integer)
    summarizer: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (
        CheckConstraint("first_message_id <= last_message_id", name="message_range"),
        Index("ix_summaries_conversation_id_id", "conversation_id", "id"),
    )


class ChannelBinding(Base):
    """A personality answering every message of a channel (or a DM channel) without being named."""

    __tablename__ = "channel_bindings"

    id: Mapped[IntId]
    personality_id: Mapped[PersonalityId]
    channel_id: Mapped[ExternalId] = mapped_column(index=True)
    guild_id: Mapped[ExternalId | None]
    created_by: Mapped[ExternalId]
    created_at: Mapped[CreatedAt]

    __table_args__ = (UniqueConstraint("channel_id", "personality_id"),)


class Persona(Base):
    """Who a user is to the personalities: global (personality_id NULL) or for one personality."""

    __tablename__ = "personas"

    id: Mapped[IntId]
    user_id: Mapped[ExternalId]
    personality_id: Mapped[PersonalityId | None]
    name: Mapped[str] = mapped_column(String(80))
    pronouns: Mapped[str | None] = mapped_column(String(40))
    about: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    __table_args__ = (
        Index("uq_personas_global", "user_id", unique=True, postgresql_where=text("personality_id IS NULL")),
        Index(
            "uq_personas_personality",
            "user_id",
            "personality_id",
            unique=True,
            postgresql_where=text("personality_id IS NOT NULL"),
        ),
    )


class IncognitoSession(Base):
    """A span of time in which a user's words with one personality (or all: NULL) form no memory.

    Rows are kept after they end: a message stored later (catch-up after downtime) is judged by
    the span its own time falls in, not by whether incognito is on when it is stored.
    """

    __tablename__ = "incognito_sessions"

    id: Mapped[IntId]
    user_id: Mapped[ExternalId] = mapped_column(index=True)
    personality_id: Mapped[PersonalityId | None]
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # When it ends by itself (NULL: until turned off) and when it was turned off.
    ends_at: Mapped[Timestamp | None]
    ended_at: Mapped[Timestamp | None]
