"""The memory service as the domain's tests build it (wired as the bot wires it, on their index,
embedder and LLM client), and the personalities, stored chats and memories they seed and read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.llm import LLMClient
from memory.owners.incognito import IncognitoService
from memory.owners.model_configs import ModelConfigResolver, RoleDefaults
from memory.owners.personalities import PersonalityService
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.keywords import encode_sparse_query
from memory.service import MemoryService
from memory.settings import load_settings
from memory.types import MessageRole, ModelConfig, RecallFilter
from memory.wiring import MemoryServices, settings_summarizer, wire_memory_services
from models import Memory, Personality

T0 = datetime(2024, 3, 15, 18, 0, tzinfo=UTC)  # when the seeded chats start


def deployment_summarizer(cfg: ModelConfig | None) -> ModelConfigResolver:
    """The deployment's summarizer is `cfg` (None: no summarizer model, extractive summaries)."""
    none = ModelConfigResolver.none()
    if cfg is None:
        return none
    defaults = RoleDefaults(
        cfg.model, cfg.api_base, cfg.api_key, cfg.temperature, cfg.max_tokens, cfg.timeout
    )
    return ModelConfigResolver(chat_defaults=none.chat_defaults, summarizer_defaults=defaults)


def make_services(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    llm: LLMClient,
    cfg: ModelConfig | None,
    *,
    input_tokens: int = 3000,
    min_summarize_tokens: int = 25,
    batch_size: int | None = None,
    numbering: bool = False,
) -> MemoryServices:
    """The services under test, wired as the bot wires them (memory.wiring) on this index, embedder
    and LLM client, summaries by `cfg` (None: extractive), with small summaries; `batch_size`: the
    exchanges formed together (FORMATION_BATCH_SIZE; None: the product's); `numbering`: `cfg`'s model
    has answered a numbered batch before, so a pass of a few exchanges is batched, not asked one a
    call (memory.formation.pace)."""
    sized = {} if batch_size is None else {"formation_batch_size": batch_size}
    settings = load_settings(
        summary_max_tokens=120,
        summary_min_tokens=16,
        summarizer_input_tokens=input_tokens,
        min_summarize_tokens=min_summarize_tokens,
        **sized,
    )
    summarizer = settings_summarizer(settings, llm)
    if numbering and cfg is not None:
        summarizer.pace.batch_answered(cfg, parsed=True)
    return wire_memory_services(
        settings,
        sessionmaker,
        models=deployment_summarizer(cfg),
        index=index,
        embedder=embedder,
        llm=llm,
        user_settings=UserSettingsService(sessionmaker),
        incognito=IncognitoService(sessionmaker),
        personas=PersonaService(sessionmaker),
        summarizer=summarizer,
    )


def make_service(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    llm: LLMClient,
    cfg: ModelConfig | None,
    *,
    input_tokens: int = 3000,
    min_summarize_tokens: int = 25,
    batch_size: int | None = None,
    numbering: bool = False,
) -> MemoryService:
    """The memory service of make_services."""
    return make_services(
        sessionmaker,
        index,
        embedder,
        llm,
        cfg,
        input_tokens=input_tokens,
        min_summarize_tokens=min_summarize_tokens,
        batch_size=batch_size,
        numbering=numbering,
    ).memory


async def add_personality(
    sessionmaker: async_sessionmaker[AsyncSession], name: str, mode: str = "verbatim", **fields: Any
) -> Personality:
    """A personality of this memory mode, with `fields` set on its row."""
    personality, _ = await PersonalityService(sessionmaker).create(name, memory_mode=mode)
    if fields:
        async with sessionmaker.begin() as session:
            await session.execute(
                update(Personality).where(Personality.id == personality.id).values(**fields)
            )
    return personality


async def add_chat(
    sessionmaker: async_sessionmaker[AsyncSession],
    personality: Personality,
    turns: Sequence[tuple[str, str]],
    *,
    user_id: str = "u1",
    user_name: str = "Alice",
    guild_id: str | None = None,
    channel_id: str | None = None,
    prefix: str = "m",
    start: int = 0,
) -> int:
    """Store (role, text) turns; returns the conversation id."""
    venue = Venue(guild_id=guild_id, channel_id=channel_id, user_id=user_id)
    async with sessionmaker.begin() as session:
        conversation_id = await ensure_conversation(session, personality.id, venue)
        await store_messages(
            session,
            conversation_id,
            [
                LoggedMessage(
                    external_id=f"{prefix}{start + i}",
                    author_id=user_id if role == "user" else "bot",
                    author_name=user_name if role == "user" else None,
                    role=MessageRole(role),
                    content=text,
                    created_at=T0 + timedelta(minutes=start + i),
                )
                for i, (role, text) in enumerate(turns)
            ],
        )
    return conversation_id


async def memories(sessionmaker: async_sessionmaker[AsyncSession]) -> list[Memory]:
    """Every memory, oldest first."""
    async with sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


async def keyword_hits(service: MemoryService, index: VectorIndex, p: Personality, words: str) -> list[Any]:
    """The keyword search's (id, score) hits for `words` in user u1's memories of `p`, indexed first."""
    await service.index_pending()
    found = await index.search(
        dense=None,
        sparse=encode_sparse_query(words),
        flt=RecallFilter(personality_id=p.id, user_id="u1"),
        limit=10,
    )
    return [(hit.id, round(hit.score, 5)) for hit in found.keyword]
