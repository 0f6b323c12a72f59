"""Shared set-up for the benchmarks: a throwaway embedded PostgreSQL and Qdrant Edge, real services."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.owners.model_configs import ModelConfigResolver, RoleDefaults
from memory.types import ModelConfig
from models.database import create_engine, create_sessionmaker, start_embedded_postgres
from models.migrate import upgrade_database


def summarizer_models(cfg: ModelConfig | None) -> ModelConfigResolver:
    """Models whose deployment summarizer is `cfg` (None: extractive summaries) and no chat model."""
    none = ModelConfigResolver.none()
    if cfg is None:
        return none
    role = RoleDefaults(cfg.model, cfg.api_base, cfg.api_key, cfg.temperature, cfg.max_tokens, cfg.timeout)
    return ModelConfigResolver(chat_defaults=none.chat_defaults, summarizer_defaults=role)


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


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def describe_ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"p50 {statistics.median(ms):7.2f} ms  p95 {percentile(ms, 0.95):7.2f} ms  max {max(ms):7.2f} ms"
