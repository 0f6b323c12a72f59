"""The domain's services wired together, in one place: the memory service, the chat service over it, the
importer, and the replies in flight they share. The composition root (bot/runtime.py) calls it with
what it opened from the settings; the tests and the benches call it too, with an index, an embedder or
an LLM client of their own."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.rolling import RollingSummarizer
from memory.chat.service import ChatService
from memory.formation.importer import TranscriptImporter
from memory.formation.pending import AwaitedReplies
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.owners.incognito import IncognitoService
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.settings import Settings


@dataclass(frozen=True)
class MemoryServices:
    """Long-term memory, chat and import over one index and one LLM client."""

    llm: LLMClient
    memory: MemoryService
    importer: TranscriptImporter
    chat: ChatService
    awaited: AwaitedReplies


def wire_memory_services(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    models: ModelConfigResolver,
    index: VectorIndex,
    embedder: Embedder,
    llm: LLMClient,
    user_settings: UserSettingsService,
    incognito: IncognitoService,
    personas: PersonaService,
    summarizer: ExchangeSummarizer | None = None,
) -> MemoryServices:
    """The memory, chat and import services as `settings` size them, on an open index; `summarizer`:
    one of the caller's own instead of the one the settings make (benches compare batch sizes)."""
    # The messages being answered: the chat turns hold them, formation leaves them to their reply.
    awaited = AwaitedReplies()
    memory = MemoryService(
        sessionmaker,
        index=index,
        embedder=embedder,
        summarizer=summarizer
        or ExchangeSummarizer(
            llm,
            max_tokens=settings.summary_max_tokens,
            min_tokens=settings.summary_min_tokens,
            input_tokens=settings.summarizer_input_tokens,
        ),
        models=models,
        awaited=awaited,
        user_settings=user_settings,
        incognito=incognito,
        personas=personas,
        min_summarize_tokens=settings.min_summarize_tokens,
    )
    chat = ChatService(
        sessionmaker,
        llm=llm,
        memory=memory,
        rolling=RollingSummarizer.from_settings(sessionmaker, llm, settings),
        models=models,
        awaited=awaited,
        context_share=settings.context_share,
        memory_context_share=settings.memory_context_share,
        lore_scan_depth=settings.lore_scan_depth,
        recall_limit=settings.recall_limit,
        reply_max_chars=settings.reply_max_chars,
    )
    return MemoryServices(
        llm=llm,
        memory=memory,
        importer=TranscriptImporter(sessionmaker, memory.formation),
        chat=chat,
        awaited=awaited,
    )
