"""Memory formation throughput: exchanges per second against LLM servers of 200 ms latency.

The baseline is the seed design's loop through the product's own path: each exchange summarized,
awaited, then embedded, stored and indexed, one after the other (MemoryService.form_pending with
batches of one and one LLM call in flight). The other rows time MemoryService.form_pending at the
product's defaults (`LLM_CONCURRENCY_PER_PROVIDER`, batch size, retries) and with a high ceiling,
against a test server that allows 64 calls in flight and one that allows 8 (both answer 429 with
Retry-After above their limit). Each row is the median of several runs, each with a fresh LLMClient
(so each pays its limit's climb from the start), printed with min and max. litellm, the embedding
model and both servers are warmed up before anything is timed. `--ahead 0` runs formation's stages
one after the other instead of as a pipeline (the design before it), for an A/B of the pipeline.

    .venv/bin/python -m bench.ingest [--exchanges 384] [--baseline-exchanges 40] [--runs 3] [--ahead N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from bench._common import BenchDatabase, bench_database, summarizer_models
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient, load_litellm
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder, make_embedder
from memory.service import MemoryService
from memory.settings import Settings
from memory.types import MessageRole, ModelConfig
from testkit.llm_server import LLMTestServer

NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana"]
PLACES = ["Porto", "Kyoto", "Lagos", "Quito", "Oslo", "Hanoi", "Tunis", "Perth"]
HIGH_CEILING = 256
# The product's defaults, not whatever this shell's environment or .env says.
DEFAULTS = {name: field.default for name, field in Settings.model_fields.items()}


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


async def seed(db: BenchDatabase, personality_id: int, count: int, prefix: str) -> None:
    rng = random.Random(7)
    messages = []
    for i in range(count):
        user, reply = exchange_text(rng, i)
        now = datetime.now(UTC)
        messages.append(LoggedMessage(f"{prefix}{i}u", "u1", "Alice", MessageRole.USER, user, now))
        messages.append(LoggedMessage(f"{prefix}{i}a", "bot", None, MessageRole.ASSISTANT, reply, now))
    async with db.sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, personality_id, Venue(None, None, f"user-{prefix}"))
        await store_messages(session, conversation, messages)


@dataclass(frozen=True)
class Run:
    rate: float  # exchanges per second
    refused: int  # 429s the server sent
    signals: int  # refusals and timeouts the limit saw (each attempt then retried)
    unretried: int  # exchanges whose summary fell back to the extractive one (an LLM call given up)
    level: int  # the limit's level at the end
    peak_in_flight: int  # the server's peak of calls in flight
    mean_in_flight: float  # calls answered x latency / elapsed: how busy the LLM was kept


@dataclass(frozen=True)
class Scenario:
    label: str
    server: LLMTestServer
    exchanges: int
    ceiling: int
    batch_size: int | None  # None: the product's default
    ahead: int | None = None  # batches summarized while one is written; None: the product's default


async def form_once(db: BenchDatabase, embedder: Embedder, scenario: Scenario, run_id: str) -> Run:
    server = scenario.server
    cfg = ModelConfig(model="openai/bench", api_base=server.base_url, api_key="x", timeout=30.0)
    personality, _ = await PersonalityService(db.sessionmaker).create(
        f"bench-{run_id}", memory_mode="summarized"
    )
    await seed(db, personality.id, scenario.exchanges, prefix=f"{run_id}-")
    index = EdgeVectorIndex(db.workdir / f"qdrant-{run_id}")
    llm = LLMClient(max_concurrency_per_provider=scenario.ceiling, max_retries=DEFAULTS["llm_max_retries"])
    batch = {} if scenario.batch_size is None else {"batch_size": scenario.batch_size}
    service = MemoryService(
        db.sessionmaker,
        index=index,
        embedder=embedder,
        summarizer=ExchangeSummarizer(llm),
        models=summarizer_models(cfg),
        **batch,  # type: ignore[arg-type]
    )
    if scenario.ahead is not None:
        service.formation.batches_ahead = scenario.ahead
    server.rejected = server.max_in_flight = 0
    answered = len(server.requests)
    start = time.perf_counter()
    report = await service.form_pending(personality_id=personality.id)
    elapsed = time.perf_counter() - start
    await index.close()
    assert report.memories == scenario.exchanges, report
    (limit,) = llm.concurrency_stats()
    return Run(
        scenario.exchanges / elapsed,
        server.rejected,
        limit.congestion_signals,
        report.extractive,
        limit.level,
        server.max_in_flight,
        (len(server.requests) - answered) * server.latency / elapsed,
    )


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} (min {min(values):6.1f}, max {max(values):6.1f})"


async def run(exchanges: int, baseline_exchanges: int, runs: int, latency: float, ahead: int | None) -> None:
    load_litellm()
    embedder = make_embedder(DEFAULTS["embedding_model"])
    await embedder.embed(["warm up the model"])
    default_ceiling = DEFAULTS["llm_concurrency_per_provider"]
    summary = "Alice's friend is travelling and Alice will look after the cat."
    async with (
        bench_database("ingest") as db,
        LLMTestServer(latency=latency, concurrency_limit=64, responder=lambda _: summary) as roomy,
        LLMTestServer(latency=latency, concurrency_limit=8, responder=lambda _: summary) as tight,
    ):
        for server in (roomy, tight):  # litellm's first call (client set-up) is not timed either
            cfg = ModelConfig(model="openai/bench", api_base=server.base_url, api_key="x")
            await LLMClient().complete(cfg, [{"role": "user", "content": "warm up"}])
        scenarios = [
            Scenario("baseline, one at a time", roomy, baseline_exchanges, 1, 1),
            Scenario(f"default (ceiling {default_ceiling})", roomy, exchanges, default_ceiling, None, ahead),
            Scenario(f"high ceiling ({HIGH_CEILING})", roomy, exchanges, HIGH_CEILING, None, ahead),
            Scenario(f"default (ceiling {default_ceiling})", tight, exchanges, default_ceiling, None, ahead),
            Scenario(f"high ceiling ({HIGH_CEILING})", tight, exchanges, HIGH_CEILING, None, ahead),
        ]
        print(
            f"{runs} runs per row; LLM latency {latency * 1000:.0f} ms; "
            f"{baseline_exchanges} exchanges per baseline run, {exchanges} per other run"
            + ("" if ahead is None else f"; {ahead} batches summarized ahead of the one written")
        )
        baseline = 0.0
        for number, scenario in enumerate(scenarios):
            results = [await form_once(db, embedder, scenario, f"s{number}r{i}") for i in range(runs)]
            rates = [r.rate for r in results]
            median = statistics.median(rates)
            baseline = baseline or median
            allowed = scenario.server.concurrency_limit or 0
            line = (
                f"server allows {allowed:>2} | {scenario.label:<24} {spread(rates)} exchanges/s "
                f"= {median / baseline:5.1f}x baseline"
            )
            if allowed == 8:
                line += f", {median / (allowed / latency):.2f}x the provider's limit"
            print(line)
            refused, signals = sum(r.refused for r in results), sum(r.signals for r in results)
            print(
                f"    429s seen {refused}, retried {signals}, "
                f"left unretried {sum(r.unretried for r in results)}; limit settled at "
                f"{[r.level for r in results]}, server peak in flight {[r.peak_in_flight for r in results]}, "
                f"mean in flight {[round(r.mean_in_flight, 1) for r in results]}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exchanges", type=int, default=384)
    parser.add_argument("--baseline-exchanges", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--ahead", type=int, default=None, help="0: formation's stages one after the other")
    args = parser.parse_args()
    asyncio.run(run(args.exchanges, args.baseline_exchanges, args.runs, args.latency, args.ahead))


if __name__ == "__main__":
    main()
