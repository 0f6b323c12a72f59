"""The composition root: settings -> database -> services, built in one place and closed together.
`open_core` gives the database and the owner services (commands that need no index); `open_runtime`
adds the index and the memory and chat services (`build_runtime`, over memory.wiring)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.settings import BotSettings
from memory.owners.bindings import BindingService
from memory.owners.greetings import Greetings
from memory.owners.incognito import IncognitoService
from memory.owners.llm_configs import LLMConfigService
from memory.owners.lore_editing import LoreService
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personalities import PersonalityService
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService
from memory.transfer.export import MemoryExport
from models.database import create_engine, create_sessionmaker, start_embedded_postgres
from models.migrate import upgrade_database

if TYPE_CHECKING:  # typing only; importing these costs seconds (litellm, torch) and happens on demand
    from memory.chat.service import ChatService
    from memory.llm import LLMClient
    from memory.recall.embedders import Embedder
    from memory.recall.index import VectorIndex
    from memory.service import MemoryService
    from memory.transfer.service import TransferService


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Core:
    """The database and the services over it; no vector index, no LLM client."""

    settings: BotSettings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    models: ModelConfigResolver
    personalities: PersonalityService
    llm_configs: LLMConfigService
    user_settings: UserSettingsService
    bindings: BindingService
    incognito: IncognitoService
    personas: PersonaService
    lore: LoreService
    greetings: Greetings
    # A user's memories exported (PostgreSQL only); the Runtime's is the whole service, import too.
    transfer: MemoryExport


@dataclass(frozen=True)
class Runtime(Core):
    """Everything the bot needs: the Core plus the memory and chat services over the vector index."""

    llm: LLMClient
    memory: MemoryService
    transfer: TransferService
    chat: ChatService


async def database_url(settings: BotSettings) -> str:
    """DATABASE_URL, or the embedded PostgreSQL under the data directory (left running for the next
    command until it has had no client for EMBEDDED_POSTGRES_IDLE_MINUTES, or `personae db stop`)."""
    if settings.database_url:
        return settings.database_url
    return await asyncio.to_thread(
        start_embedded_postgres,
        settings.personae_data_dir,
        keep_running=True,
        idle_minutes=settings.embedded_postgres_idle_minutes,
    )


def build_core(
    settings: BotSettings, engine: AsyncEngine, sessionmaker: async_sessionmaker[AsyncSession]
) -> Core:
    """The Core on an open database; the deployment's admins, creators and allow-list go in here."""
    personalities = PersonalityService(
        sessionmaker,
        admin_ids=settings.admin_ids,
        model_allow_list=settings.model_allow_list,
        creator_ids=settings.personality_creator_ids,
    )
    return Core(
        settings=settings,
        engine=engine,
        sessionmaker=sessionmaker,
        models=ModelConfigResolver.from_settings(settings),
        personalities=personalities,
        llm_configs=LLMConfigService(sessionmaker, admin_ids=settings.admin_ids),
        user_settings=UserSettingsService(sessionmaker),
        bindings=BindingService(sessionmaker),
        incognito=IncognitoService(sessionmaker),
        personas=PersonaService(sessionmaker),
        lore=LoreService(sessionmaker, personalities),
        greetings=Greetings(sessionmaker),
        transfer=MemoryExport(sessionmaker),
    )


@asynccontextmanager
async def open_core(settings: BotSettings) -> AsyncIterator[Core]:
    """Connect to the database, migrate it to head, and build the Core; disposed on exit."""
    engine = create_engine(await database_url(settings))
    try:
        await upgrade_database(engine)
        yield build_core(settings, engine, create_sessionmaker(engine))
    finally:
        await engine.dispose()


def make_deployment_embedder(settings: BotSettings, *, load_now: bool = False) -> Embedder:
    """The embedder EMBEDDING_MODEL names; `load_now`: start loading it at once (in the background)."""
    from memory.recall.embedders import make_embedder

    return make_embedder(settings.embedding_model, api_base=settings.embedding_api_base, load_now=load_now)


def build_runtime(core: Core, *, index: VectorIndex, embedder: Embedder, llm: LLMClient) -> Runtime:
    """The Core and the memory and chat services over it, on an open index (memory.wiring)."""
    from memory.wiring import wire_memory_services

    services = wire_memory_services(
        core.settings,
        core.sessionmaker,
        models=core.models,
        index=index,
        embedder=embedder,
        llm=llm,
        user_settings=core.user_settings,
        incognito=core.incognito,
        personas=core.personas,
    )
    # A personality created, renamed or deleted here is routable (or not) from the next message on.
    core.personalities.subscribe(services.chat.invalidate_routing)
    # The services' transfer (import and export) takes the place of the Core's (export only).
    return Runtime(
        **{field.name: getattr(core, field.name) for field in dataclasses.fields(Core)}
        | {field.name: getattr(services, field.name) for field in dataclasses.fields(services)}
    )


@asynccontextmanager
async def open_memory_services(
    core: Core,
    *,
    embedder: Embedder | None = None,
    rebuild_index: bool = False,
    index_when_used: bool = False,
) -> AsyncIterator[Runtime]:
    """Open the vector index and build the memory and chat services over the Core; closed on exit.

    rebuild_index: a damaged embedded index is started empty (a full reindex refills it) instead of
    refusing to open with a line that names `personae reindex`.
    index_when_used: the index opens at its first use, not now (a command that may only read
    PostgreSQL runs while another process holds the embedded index).
    """
    from memory.llm import LLMClient
    from memory.recall.backends import open_vector_index
    from memory.recall.index import IndexOpenedWhenUsed

    settings = core.settings
    api_key = settings.qdrant_api_key

    def open_index() -> VectorIndex:
        return open_vector_index(
            qdrant_url=settings.qdrant_url,
            qdrant_api_key=api_key.get_secret_value() if api_key else None,
            data_dir=settings.personae_data_dir,
            rebuild_if_damaged=rebuild_index,
        )

    index = IndexOpenedWhenUsed(open_index) if index_when_used else open_index()
    try:
        runtime = build_runtime(
            core,
            index=index,
            embedder=embedder or make_deployment_embedder(settings),
            llm=LLMClient(
                max_concurrency_per_provider=settings.llm_concurrency_per_provider,
                max_retries=settings.llm_max_retries,
            ),
        )
        if not (rebuild_index or index_when_used) and (lost := await runtime.memory.lost_from_index()):
            log.warning(
                "The vector index is empty but PostgreSQL holds %d indexed memories: recall finds "
                "nothing until `personae reindex` rebuilds it",
                lost,
            )
        yield runtime
    finally:
        await index.close()


@asynccontextmanager
async def open_runtime(settings: BotSettings, *, rebuild_index: bool = False) -> AsyncIterator[Runtime]:
    """The Core and the memory services on it: what the bot and the memory commands run on."""
    async with (
        open_core(settings) as core,
        open_memory_services(core, rebuild_index=rebuild_index) as runtime,
    ):
        yield runtime
