"""Recall latency (query embedding + hybrid search + PostgreSQL read) at 10k and 100k memories.

The corpus is synthetic so that 100k memories load in a minute: rows go to PostgreSQL in bulk and
points to the embedded Qdrant Edge index with random unit vectors (a worst case for HNSW) and real
sparse keyword vectors; queries are embedded by the real local model, as in the bot.

    .venv/bin/python -m bench.recall [--sizes 10000 100000] [--queries 200] [--users 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import insert

from bench._common import bench_database, describe_ms, summarizer_models
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import LocalEmbedder
from memory.recall.store import memory_point
from memory.service import MemoryService
from models import Memory

TOPICS = [
    "dog named {n} turned {k} on May {d}",
    "trip to {p} planned for June {d}",
    "sister {n} moved to {p}",
    "rent is {k}00 euros a month",
    "started a new job at {p} Labs",
    "learning to bake sourdough with {n}",
    "marathon in {p} finished in {k} hours",
    "allergic to peanuts since age {k}",
    "birthday party for {n} on the {d}th",
]
NAMES = ["Biscuit", "Leila", "Marco", "Yuki", "Ade", "Noor", "Tomas", "Ines", "Kai", "Rosa"]
PLACES = ["Porto", "Kyoto", "Lagos", "Quito", "Oslo", "Hanoi", "Tunis", "Perth", "Lima", "Riga"]
QUERIES = [
    "what is my dog called",
    "where did my sister move",
    "how much is my rent",
    "when is the trip",
    "what am I allergic to",
    "Porto",
    "birthday party",
    "new job",
    "marathon time",
    "sourdough",
]


def memory_text(rng: random.Random) -> str:
    template = rng.choice(TOPICS)
    return "User mentioned their " + template.format(
        n=rng.choice(NAMES), p=rng.choice(PLACES), k=rng.randint(2, 19), d=rng.randint(1, 28)
    )


async def load(
    service: MemoryService,
    index: EdgeVectorIndex,
    sessionmaker,
    personality_id: int,  # type: ignore[no-untyped-def]
    start: int,
    count: int,
    users: int,
    dim: int,
) -> None:
    rng = random.Random(start)
    np_rng = np.random.default_rng(start)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    for offset in range(0, count, 2000):
        n = min(2000, count - offset)
        vectors = np_rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows, points = [], []
        for i in range(n):
            number = start + offset + i
            text = memory_text(rng)
            user = f"user{number % users}"
            occurred = t0 + timedelta(minutes=number)
            memory_id = uuid.uuid5(uuid.NAMESPACE_OID, f"bench-{number}")
            rows.append(
                {
                    "id": memory_id,
                    "personality_id": personality_id,
                    "user_id": user,
                    "guild_id": "g1",
                    "channel_id": "c1",
                    "is_dm": False,
                    "mode": "summarized",
                    "content": text,
                    "source_chars": len(text) * 3,
                    "summarized": True,
                    "summarizer": "bench",
                    "source_message_ids": [f"m{number}"],
                    "occurred_at": occurred,
                    "state": "indexed",
                    "embedding_model": service.embedding_model,
                }
            )
            points.append(memory_point(rows[-1], vectors[i].tolist()))
        async with sessionmaker.begin() as session:
            await session.execute(insert(Memory), rows)
        await index.upsert(points)


async def run(sizes: list[int], queries: int, users: int) -> None:
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    async with bench_database("recall") as db:
        index = EdgeVectorIndex(db.workdir / "qdrant")
        await index.ensure_collection(embedder.dimension)
        service = MemoryService(
            db.sessionmaker,
            index=index,
            embedder=embedder,
            summarizer=ExchangeSummarizer(LLMClient()),
            models=summarizer_models(None),
        )
        personality, _ = await PersonalityService(db.sessionmaker).create("bench", memory_mode="summarized")
        loaded = 0
        rng = random.Random(1)
        for size in sorted(sizes):
            t = time.perf_counter()
            await load(
                service,
                index,
                db.sessionmaker,
                personality.id,
                loaded,
                size - loaded,
                users,
                embedder.dimension,
            )
            loaded = size
            print(f"loaded {size:,} memories ({users} users) in {time.perf_counter() - t:.1f} s")
            totals, embeds = [], []
            for _ in range(queries):
                query = rng.choice(QUERIES)
                user = f"user{rng.randrange(users)}"
                t = time.perf_counter()
                await embedder.embed([query])
                embeds.append(time.perf_counter() - t)
                t = time.perf_counter()
                found = await service.recall(
                    personality_id=personality.id, user_id=user, query=query, guild_id="g1", limit=5
                )
                totals.append(time.perf_counter() - t)
                assert all(m.id for m in found)
            print(
                f"  recall at {size:>7,}: {describe_ms(totals)}\n"
                f"    of which query embedding: {describe_ms(embeds)}"
            )
        await index.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--users", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(run(args.sizes, args.queries, args.users))


if __name__ == "__main__":
    main()
