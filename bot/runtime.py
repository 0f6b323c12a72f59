"""The composition root: settings -> database -> index, models, services; built once, closed together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.owners.bindings import BindingService
from memory.owners.llm_configs import LLMConfigService
from memory.owners.personalities import PersonalityService
from memory.owners.user_settings import UserSettingsService
from memory.settings import Settings
from memory.types import ModelConfig
from models.database import create_engine, create_sessionmaker, start_embedded_postgres
from models.migrate import upgrade_database

if TYPE_CHECKING:  # typing only; importing these costs seconds (litellm, torch) and happens on demand
    from memory.chat.service import ChatService
    from memory.formation.importer import TranscriptImporter
    from memory.llm import LLMClient
    from memory.recall.embedders import Embedder
    from memory.service import MemoryService

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a command or the bot needs, already connected."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    personalities: PersonalityService
    llm: LLMClient | None = None
    memory: MemoryService | None = None
    importer: TranscriptImporter | None = None
    bindings: BindingService | None = None
    chat: ChatService | None = None
    user_settings: UserSettingsService | None = None
    llm_configs: LLMConfigService | None = None

    def require_memory(self) -> MemoryService:
        assert self.memory is not None, "open_runtime(..., with_memory=True) builds the memory service"
        return self.memory


async def database_url(settings: Settings) -> str:
    """DATABASE_URL, or the embedded PostgreSQL under the data directory."""
    if settings.database_url:
        return settings.database_url
    return await asyncio.to_thread(start_embedded_postgres, settings.personae_data_dir)


def _deployment_model(
    model: str | None,
    api_base: str | None,
    api_key: SecretStr | None,
    *,
    temperature: float,
    max_tokens: int,
    timeout: float,
) -> ModelConfig | None:
    if not model:
        return None
    return ModelConfig(
        model=model,
        api_base=api_base,
        api_key=api_key.get_secret_value() if api_key else None,
        temperature=temperature,
        max_tokens=max_tokens,
        timeout=timeout,
    )


def summarizer_model_config(settings: Settings) -> ModelConfig | None:
    """The deployment's summarizer (SUMMARIZER_MODEL), or None for extractive summaries."""
    return _deployment_model(
        settings.summarizer_model,
        settings.summarizer_api_base,
        settings.summarizer_api_key,
        temperature=0.2,
        max_tokens=settings.summary_max_tokens,
        timeout=settings.llm_timeout,
    )


def personality_service(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> PersonalityService:
    """Personalities with the deployment's admins and model allow-list."""
    return PersonalityService(
        sessionmaker,
        admin_ids=settings.admin_ids,
        model_allow_list=settings.model_allow_list,
        creator_ids=settings.personality_creator_ids,
    )


def chat_model_config(settings: Settings) -> ModelConfig | None:
    """The deployment's chat model (CHAT_MODEL), or None when the bot cannot reply."""
    return _deployment_model(
        settings.chat_model,
        settings.chat_api_base,
        settings.chat_api_key,
        temperature=0.8,
        max_tokens=512,
        timeout=settings.llm_timeout,
    )


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, migrate: bool = True, with_memory: bool = False
) -> AsyncIterator[Runtime]:
    """Connect to the database (migrating it to head) and build the services.

    with_memory also opens the vector index (the embedded one is held by one process at a time),
    the embedder and the LLM client, which only commands that form or recall memories need.
    """
    engine = create_engine(await database_url(settings))
    try:
        if migrate:
            await upgrade_database(engine)
        sessionmaker = create_sessionmaker(engine)
        if not with_memory:
            yield Runtime(
                settings=settings,
                engine=engine,
                sessionmaker=sessionmaker,
                personalities=personality_service(settings, sessionmaker),
                user_settings=UserSettingsService(sessionmaker),
                llm_configs=LLMConfigService(sessionmaker, admin_ids=settings.admin_ids),
            )
            return
        async with build_memory_services(settings, engine, sessionmaker) as runtime:
            yield runtime
    finally:
        await engine.dispose()


@asynccontextmanager
async def build_memory_services(
    settings: Settings,
    engine: AsyncEngine,
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    embedder: Embedder | None = None,
) -> AsyncIterator[Runtime]:
    """Open the vector index and build every service on an existing database connection."""
    from memory.chat.rolling import RollingSummarizer
    from memory.chat.service import ChatService
    from memory.formation.importer import TranscriptImporter
    from memory.formation.summarizer import ExchangeSummarizer
    from memory.llm import LLMClient
    from memory.recall.embedders import make_embedder
    from memory.recall.index import open_vector_index
    from memory.service import MemoryService

    api_key = settings.qdrant_api_key
    index = open_vector_index(
        qdrant_url=settings.qdrant_url,
        qdrant_api_key=api_key.get_secret_value() if api_key else None,
        data_dir=settings.personae_data_dir,
    )
    try:
        llm = LLMClient(
            max_concurrency_per_provider=settings.llm_concurrency_per_provider,
            max_retries=settings.llm_max_retries,
        )
        if embedder is None:
            embedder = make_embedder(settings.embedding_model, api_base=settings.embedding_api_base)
        summarizer = ExchangeSummarizer(
            llm,
            max_tokens=settings.summary_max_tokens,
            min_tokens=settings.summary_min_tokens,
            input_tokens=settings.summarizer_input_tokens,
        )
        memory = MemoryService(
            sessionmaker,
            index=index,
            embedder=embedder,
            summarizer=summarizer,
            default_summarizer=summarizer_model_config(settings),
            min_summarize_tokens=settings.min_summarize_tokens,
        )
        yield Runtime(
            settings=settings,
            engine=engine,
            sessionmaker=sessionmaker,
            personalities=personality_service(settings, sessionmaker),
            llm=llm,
            memory=memory,
            importer=TranscriptImporter(sessionmaker, memory),
            bindings=BindingService(sessionmaker),
            chat=ChatService(
                sessionmaker,
                llm=llm,
                memory=memory,
                rolling=RollingSummarizer(
                    sessionmaker,
                    llm,
                    threshold_tokens=settings.rolling_summary_threshold_tokens,
                    min_messages=settings.rolling_summary_min_messages,
                    max_tokens=settings.rolling_summary_max_tokens,
                    input_tokens=settings.summarizer_input_tokens,
                ),
                default_chat=chat_model_config(settings),
                chat_api_base=settings.chat_api_base,
                chat_api_key=settings.chat_api_key.get_secret_value() if settings.chat_api_key else None,
                summarizer_default=summarizer_model_config(settings),
                context_share=settings.context_share,
                memory_context_share=settings.memory_context_share,
                recall_limit=settings.recall_limit,
                llm_timeout=settings.llm_timeout,
            ),
            user_settings=UserSettingsService(sessionmaker),
            llm_configs=LLMConfigService(sessionmaker, admin_ids=settings.admin_ids),
        )
    finally:
        await index.close()
