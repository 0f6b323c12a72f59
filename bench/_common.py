"""Shared set-up for the benchmarks: a throwaway embedded PostgreSQL and Qdrant Edge, the product's
services wired as the bot wires them (memory.wiring, `bench_services`), and the few figures every bench prints
the same way (percentiles, median (min, max), RSS)."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.owners.bindings import BindingService
from memory.owners.incognito import IncognitoService
from memory.owners.model_configs import ModelConfigResolver
from memory.owners.personalities import PersonalityService
from memory.owners.personas import PersonaService
from memory.owners.user_settings import UserSettingsService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.local_embedder import LocalEmbedder
from memory.service import MemoryService
from memory.settings import load_settings
from memory.types import ModelConfig
from memory.wiring import MemoryServices, wire_memory_services
from models.database import create_engine, create_sessionmaker, start_embedded_postgres
from models.migrate import upgrade_database


@dataclass
class BenchDatabase:
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    workdir: Path


@asynccontextmanager
async def bench_database(name: str) -> AsyncIterator[BenchDatabase]:
    """A fresh database (BENCH_DATABASE_URL, or an embedded PostgreSQL in a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix=f"personae-{name}-") as tmp:
        workdir = Path(tmp)
        url = os.environ.get("BENCH_DATABASE_URL") or start_embedded_postgres(
            workdir, database=f"bench_{name}"
        )
        engine = create_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1), pool_size=10)
        try:
            await upgrade_database(engine)
            yield BenchDatabase(engine=engine, sessionmaker=create_sessionmaker(engine), workdir=workdir)
        finally:
            await engine.dispose()


def bench_services(
    db: BenchDatabase,
    *,
    index: VectorIndex,
    embedder: Embedder,
    llm: LLMClient | None = None,
    summarizer: ModelConfig | None = None,
    summarizer_batch: int | None = None,
    **settings: Any,
) -> MemoryServices:
    """The product's services as the bot wires them, on this database and index: summaries by
    `summarizer` (None: extractive), `summarizer_batch` exchanges a call (None: the product's), no chat
    model unless `settings` name one."""
    values: dict[str, Any] = {"personae_data_dir": db.workdir, "chat_model": None, "summarizer_model": None}
    if summarizer is not None:
        values |= {
            "summarizer_model": summarizer.model,
            "summarizer_api_base": summarizer.api_base,
            "summarizer_api_key": summarizer.api_key,
            "llm_timeout": summarizer.timeout,
        }
    deployment = load_settings(**(values | settings))
    sessionmaker = db.sessionmaker
    llm = llm or LLMClient()
    exchange_summarizer = None
    if summarizer_batch is not None:
        exchange_summarizer = ExchangeSummarizer(
            llm,
            max_tokens=deployment.summary_max_tokens,
            min_tokens=deployment.summary_min_tokens,
            input_tokens=deployment.summarizer_input_tokens,
            batch_exchanges=summarizer_batch,
        )
    return wire_memory_services(
        deployment,
        sessionmaker,
        models=ModelConfigResolver.from_settings(deployment),
        index=index,
        embedder=embedder,
        llm=llm,
        user_settings=UserSettingsService(sessionmaker),
        incognito=IncognitoService(sessionmaker),
        personas=PersonaService(sessionmaker),
        summarizer=exchange_summarizer,
    )


@dataclass
class BenchMemory:
    """A fresh database, an Edge index in its folder and the product's services over both."""

    db: BenchDatabase
    index: EdgeVectorIndex
    embedder: LocalEmbedder
    services: MemoryServices

    @property
    def service(self) -> MemoryService:
        return self.services.memory

    @property
    def personalities(self) -> PersonalityService:
        return PersonalityService(self.db.sessionmaker)

    @property
    def bindings(self) -> BindingService:
        return BindingService(self.db.sessionmaker)


@asynccontextmanager
async def bench_memory(
    name: str, *, llm: LLMClient | None = None, optimize_after: int = 2000, **settings: Any
) -> AsyncIterator[BenchMemory]:
    """The product's services on a fresh database and index, the local embedder warmed up.

    Extractive summaries and no chat model unless `settings` say otherwise (see `bench_services`).
    `optimize_after` is the index's (a bulk load passes a larger one and optimizes once at the end).
    """
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    async with bench_database(name) as db:
        index = EdgeVectorIndex(db.workdir / "qdrant", optimize_after=optimize_after)
        try:
            await index.ensure_collection(embedder.dimension)
            services = bench_services(db, index=index, embedder=embedder, llm=llm, **settings)
            yield BenchMemory(db, index, embedder, services)
        finally:
            await index.close()


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser whose help is the bench module's docstring, as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def describe_ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"p50 {statistics.median(ms):7.2f} ms  p95 {percentile(ms, 0.95):7.2f} ms  max {max(ms):7.2f} ms"


def spread(values: list[float], digits: int = 1) -> str:
    """The median of several runs with their min and max: `12.3 (min 11.9, max 13.0)`."""
    return (
        f"{statistics.median(values):.{digits}f} (min {min(values):.{digits}f}, max {max(values):.{digits}f})"
    )


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
