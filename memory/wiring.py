"""The domain's services wired together, in one place: formation, the memory service over it, the chat
service over that, import and export, and the replies in flight they share. The composition root
(bot/runtime.py) calls it with what it opened from the settings; the tests and the benches call it too,
with an index, an embedder or an LLM client of their own."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.rolling import RollingSummarizer
from memory.chat.service import ChatService
from memory.formation.forming import MemoryFormation
from memory.formation.pending import AwaitedReplies
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.owners.incognito import IncognitoService
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.store import MemoryStore
from memory.service import MemoryService
from memory.settings import Settings
from memory.transfer.service import TransferService


@dataclass(frozen=True)
class MemoryServices:
    """Long-term memory, chat, import and export over one index and one LLM client."""

    llm: LLMClient
    memory: MemoryService
    transfer: TransferService
    chat: ChatService


def settings_summarizer(settings: Settings, llm: LLMClient) -> ExchangeSummarizer:
    """The summarizer as `settings` size its summaries and calls."""
    return ExchangeSummarizer(
        llm,
        max_tokens=settings.summary_max_tokens,
        min_tokens=settings.summary_min_tokens,
        input_tokens=settings.summarizer_input_tokens,
    )


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
    """The memory, chat and transfer services as `settings` size them, on an open index; `summarizer`:
    one of the caller's own instead of the one the settings make (benches compare batch sizes)."""
    # The messages being answered: the chat turns hold them, formation leaves them to their reply.
    awaited = AwaitedReplies()
    summarizer = summarizer or settings_summarizer(settings, llm)
    # One formation, one store: what the chat, the worker and an import form goes through the same.
    formation = MemoryFormation(
        MemoryStore(sessionmaker, index, embedder),
        summarizer,
        models,
        awaited=awaited,
        min_summarize_tokens=settings.min_summarize_tokens,
        batch_size=settings.formation_batch_size,
        batches_ahead=settings.formation_batches_ahead,
    )
    memory = MemoryService(
        formation,
        summarizer=summarizer,
        models=models,
        user_settings=user_settings,
        incognito=incognito,
        personas=personas,
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
        transfer=TransferService(sessionmaker, formation),
        chat=chat,
    )
