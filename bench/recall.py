"""Recall latency (query embedding + hybrid search + PostgreSQL read), from 10k to 1M memories.

Each size gets a fresh database and index, loaded in bulk: rows go to PostgreSQL and points to the
embedded Qdrant Edge index in large batches at once (the index not optimized meanwhile), then the
index is optimized once (HNSW built, segments merged). The corpus is synthetic so that a million
memories load in minutes: points carry random unit vectors (a worst case for HNSW) and real sparse
keyword vectors; queries are real text embedded by the real local model, as in the bot. One user has
many memories (`--heavy`, default size / 20, at most 50,000); the others share the rest.

Printed per size: load time (written, then optimized), the index's size on disk, this process's RSS
(the index and the embedder live in it; PostgreSQL is another process), and recall p50/p95 for
typical users and for the heavy one, each the median (min, max) over `--runs` passes of `--queries`.

    .venv/bin/python -m bench.recall [--memories 10000 100000] [--users 1000] [--queries 200] [--runs 3]
    .venv/bin/python -m bench.recall --memories 1000000 --users 10000     # ~100 memories a user
"""

from __future__ import annotations

import asyncio
import random
import resource
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert

from bench._common import (
    BenchMemory,
    bench_memory,
    bench_parser,
    load_average,
    percentile,
    rss_mb,
    spread,
)
from memory.owners.personalities import PersonalityService
from memory.recall.store import memory_point
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
BATCH = 5000  # rows and points per write: large batches, as a bulk load
HEAVY_USER = "heavy"
HEAVY_MAX = 50_000


def memory_text(rng: random.Random) -> str:
    template = rng.choice(TOPICS)
    return "User mentioned their " + template.format(
        n=rng.choice(NAMES), p=rng.choice(PLACES), k=rng.randint(2, 19), d=rng.randint(1, 28)
    )


async def load(memory: BenchMemory, personality_id: int, count: int, user_of: Callable[[int], str]) -> None:
    """Write `count` synthetic memories in bulk, memory `n` belonging to `user_of(n)`; each batch's
    PostgreSQL rows and index points are written at once."""
    rng = random.Random(count)
    np_rng = np.random.default_rng(count)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    dim = memory.embedder.dimension
    for offset in range(0, count, BATCH):
        n = min(BATCH, count - offset)
        vectors = np_rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows: list[dict[str, Any]] = []
        for number in range(offset, offset + n):
            text = memory_text(rng)
            rows.append(
                {
                    "id": uuid.uuid5(uuid.NAMESPACE_OID, f"bench-{number}"),
                    "personality_id": personality_id,
                    "user_id": user_of(number),
                    "guild_id": "g1",
                    "channel_id": "c1",
                    "is_dm": False,
                    "mode": "summarized",
                    "content": text,
                    "source_chars": len(text) * 3,
                    "summarized": True,
                    "summarizer": "bench",
                    "source_message_ids": [f"m{number}"],
                    "occurred_at": t0 + timedelta(minutes=number),
                    "state": "indexed",
                    "embedding_model": memory.service.embedding_model,
                }
            )
        points = [memory_point(row, vector) for row, vector in zip(rows, vectors.tolist(), strict=True)]
        await asyncio.gather(_insert_rows(memory, rows), memory.index.upsert(points))


async def _insert_rows(memory: BenchMemory, rows: list[dict[str, Any]]) -> None:
    async with memory.db.sessionmaker.begin() as session:
        await session.execute(insert(Memory), rows)


def directory_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


async def time_recalls(
    memory: BenchMemory, personality_id: int, users: Callable[[random.Random], str], queries: int, seed: int
) -> tuple[list[float], list[float]]:
    """Seconds per recall (end to end) and per query embedding alone, for `queries` random queries."""
    rng = random.Random(seed)
    totals, embeds = [], []
    for _ in range(queries):
        query, user = rng.choice(QUERIES), users(rng)
        t = time.perf_counter()
        await memory.embedder.embed([query])
        embeds.append(time.perf_counter() - t)
        t = time.perf_counter()
        found = await memory.service.recall(
            personality_id=personality_id, user_id=user, query=query, guild_id="g1", limit=5
        )
        totals.append(time.perf_counter() - t)
        assert all(m.id for m in found)
    return totals, embeds


def report(label: str, runs: list[tuple[list[float], list[float]]]) -> None:
    def ms(share: float, side: int) -> str:
        return spread([1000 * percentile(run[side], share) for run in runs], 2)

    print(f"  {label}: recall p50 {ms(0.5, 0)} ms, p95 {ms(0.95, 0)} ms")
    print(f"  {' ' * len(label)}  of which query embedding p50 {ms(0.5, 1)} ms, p95 {ms(0.95, 1)} ms")


async def measure(size: int, users: int, heavy: int, queries: int, runs: int) -> None:
    # Memories are dealt to users round-robin, the heavy user's spread evenly among them.
    stride = size // heavy if heavy else 0

    def user_of(number: int) -> str:
        if stride and number % stride == 0 and number // stride < heavy:
            return HEAVY_USER
        return f"user{number % users}"

    async with bench_memory(f"recall{size}", optimize_after=size + 1) as memory:
        personality, _ = await PersonalityService(memory.db.sessionmaker).create(
            "bench", memory_mode="summarized"
        )
        started = time.perf_counter()
        await load(memory, personality.id, size, user_of)
        written = time.perf_counter() - started
        started = time.perf_counter()
        await memory.index.optimize()
        optimized = time.perf_counter() - started
        typical = (size - heavy) / users
        print(
            f"{size:,} memories: {users:,} users with ~{typical:.0f} each, one with {heavy:,}; "
            f"load average {load_average()}"
        )
        print(
            f"  loaded in {written + optimized:.1f} s: written {written:.1f} s "
            f"({size / written:,.0f} memories/s), optimized {optimized:.1f} s"
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  process RSS {rss_mb():,.0f} MB (peak {peak:,.0f})")
        typical_runs, heavy_runs = [], []
        for run in range(runs):
            typical_runs.append(
                await time_recalls(
                    memory, personality.id, lambda rng: f"user{rng.randrange(users)}", queries, run
                )
            )
            if heavy:
                heavy_runs.append(
                    await time_recalls(memory, personality.id, lambda _: HEAVY_USER, queries, run)
                )
        report(f"typical user (~{typical:.0f} memories)", typical_runs)
        if heavy:
            report(f"heavy user ({heavy:,} memories)", heavy_runs)
        await memory.index.close()  # measured closed: the shard flushed, its write-ahead log folded in
        print(f"  index on disk {directory_mb(memory.db.workdir / 'qdrant'):,.0f} MB")


async def run(sizes: list[int], users: int, heavy: int | None, queries: int, runs: int) -> None:
    print(f"{runs} passes of {queries} queries per user kind; median (min, max) over the passes")
    for size in sizes:
        await measure(size, users, min(HEAVY_MAX, size // 20) if heavy is None else heavy, queries, runs)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--memories", "--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--heavy", type=int, default=None, help="memories of the heavy user")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.memories, args.users, args.heavy, args.queries, args.runs))


if __name__ == "__main__":
    main()
