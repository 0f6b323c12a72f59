"""Memory formation throughput: exchanges per second against an LLM with 200 ms latency.

Ours (batched, concurrent summarization and batched embedding) against the naive baseline in the
same run: one exchange at a time, awaited in a loop (batch size 1, one LLM call in flight).

    .venv/bin/python -m bench.ingest [--exchanges 192] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from bench._common import bench_database, summarizer_models
from memory.conversations import NewMessage, Venue, ensure_conversation, store_messages
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import LocalEmbedder
from memory.service import MemoryService
from memory.types import MessageRole, ModelConfig
from testkit.llm_server import LLMTestServer

NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana"]
PLACES = ["Porto", "Kyoto", "Lagos", "Quito", "Oslo", "Hanoi", "Tunis", "Perth"]


def exchange_text(rng: random.Random, i: int) -> tuple[str, str]:
    name, place = rng.choice(NAMES), rng.choice(PLACES)
    user = (
        f"*stretches* okay so update #{i}!!! 😄 My friend {name} is flying to {place} on the {i % 28 + 1}th "
        f"and asked me to look after her cat for {i % 9 + 2} days, which is fine, but the cat hates me lol. "
        f"Also the plumber quoted {100 + i} euros to fix the kitchen sink, which feels like a lot honestly."
    )
    reply = (
        f"*laughs softly* {name} trusts you with the cat, that's sweet. {place} will be lovely this time of "
        f"year. And {100 + i} euros for a sink? Ask for a second quote before you agree to anything!"
    )
    return user, reply


async def seed(sessionmaker, personality_id: int, count: int, prefix: str) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(7)
    messages = []
    for i in range(count):
        user, reply = exchange_text(rng, i)
        messages.append(NewMessage(f"{prefix}{i}u", "u1", "Alice", MessageRole.USER, user, _now()))
        messages.append(NewMessage(f"{prefix}{i}a", "bot", None, MessageRole.ASSISTANT, reply, _now()))
    async with sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, personality_id, Venue(None, None, f"user-{prefix}"))
        await store_messages(session, conversation, messages)


def _now():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    return datetime.now(UTC)


async def run(exchanges: int, latency: float, concurrency: int) -> None:
    embedder = LocalEmbedder()
    await embedder.embed(["warm up the model"])
    async with bench_database("ingest") as db, LLMTestServer() as server:
        server.latency = latency
        server.responder = lambda request: "Alice's friend is travelling and Alice will look after the cat."
        cfg = ModelConfig(model="openai/bench", api_base=server.base_url, api_key="x", timeout=30.0)
        personalities = PersonalityService(db.sessionmaker)
        results = {}
        for label, batch, in_flight in (("baseline (one at a time)", 1, 1), ("ours", 64, concurrency)):
            personality, _ = await personalities.create(f"bench-{batch}", memory_mode="summarized")
            await seed(db.sessionmaker, personality.id, exchanges, prefix=f"b{batch}-")
            index = EdgeVectorIndex(db.workdir / f"qdrant-{batch}")
            llm = LLMClient(max_concurrency_per_provider=in_flight, max_retries=0)
            service = MemoryService(
                db.sessionmaker,
                index=index,
                embedder=embedder,
                summarizer=ExchangeSummarizer(llm),
                models=summarizer_models(cfg),
                batch_size=batch,
            )
            start = time.perf_counter()
            report = await service.form_pending(personality_id=personality.id)
            elapsed = time.perf_counter() - start
            await index.close()
            assert report.memories == exchanges, report
            results[label] = exchanges / elapsed
            print(
                f"{label:<26} {exchanges} exchanges in {elapsed:7.2f} s = "
                f"{exchanges / elapsed:8.1f} exchanges/s"
            )
        ours, baseline = results["ours"], results["baseline (one at a time)"]
        print(
            f"speed-up: {ours / baseline:.1f}x (target >= 20x), LLM latency {latency * 1000:.0f} ms, "
            f"{concurrency} concurrent calls per provider, embedding batches of up to 64"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exchanges", type=int, default=192)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(run(args.exchanges, args.latency, args.concurrency))


if __name__ == "__main__":
    main()
