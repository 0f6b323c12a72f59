"""Memory formation throughput: exchanges per second against LLM servers of 200 ms latency, and the
verbatim import of real conversations (no LLM at all).

The baseline is the seed design's loop through the product's own path: each exchange summarized,
awaited, then embedded, stored and indexed, one after the other (MemoryService.form_pending with
batches of one and one LLM call in flight). The other rows time MemoryService.form_pending at the
product's defaults (`LLM_CONCURRENCY_PER_PROVIDER`, batch size, retries) and with a high ceiling,
against a test server that allows 64 calls in flight and one that allows 8 (both answer 429 with
Retry-After above their limit). Each row is the median of several runs, each with a fresh LLMClient
(so each pays its limit's climb from the start), printed with min and max. litellm, the embedding
model and both servers are warmed up before anything is timed.

The test servers run in a child process each, as a provider runs elsewhere: their CPU is not the
bench's (`--in-process` runs them in the bench's event loop instead, as this bench did before).
`--ahead 0` runs formation's stages one after the other instead of as a pipeline, for an A/B.

The verbatim rows import the LoCoMo development conversations (../shared/eval/locomo-dev; the
synthetic recall set when they are absent) as `personae import --mode verbatim` does: the messages
stored, then every exchange embedded, written and indexed. Parsing the file is not timed.

    .venv/bin/python -m bench.ingest [--exchanges 384] [--baseline-exchanges 40] [--runs 3]
        [--servers roomy tight] [--verbatim-runs 3] [--ahead N] [--in-process]
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from bench._common import BenchDatabase, bench_database, bench_parser, bench_services, load_average, spread
from bench.llm_servers import BenchServer
from bench.locomo import dev_dialogues
from bench.recall_sets import Dialogue, synthetic_dialogue
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.llm import LLMClient, load_litellm
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder, make_embedder
from memory.settings import Settings
from memory.transfer.transcript import read_transcript
from memory.types import MemoryMode, MessageRole, ModelConfig

NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana"]
PLACES = ["Porto", "Kyoto", "Lagos", "Quito", "Oslo", "Hanoi", "Tunis", "Perth"]
HIGH_CEILING = 256
SUMMARY = "Alice's friend is travelling and Alice will look after the cat."
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


def bench_model(server: BenchServer) -> ModelConfig:
    # The same config for the warm-up and the runs: litellm keeps an HTTP client per (base, key,
    # timeout), and making one takes ~0.5 s of the event loop.
    return ModelConfig(model="openai/bench", api_base=server.base_url, api_key="x", timeout=30.0)


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
    server: BenchServer
    exchanges: int
    ceiling: int
    batch_size: int | None  # None: the product's default
    ahead: int | None = None  # batches summarized while one is written; None: the product's default


async def form_once(db: BenchDatabase, embedder: Embedder, scenario: Scenario, run_id: str) -> Run:
    server = scenario.server
    cfg = bench_model(server)
    personality, _ = await PersonalityService(db.sessionmaker).create(
        f"bench-{run_id}", memory_mode="summarized"
    )
    await seed(db, personality.id, scenario.exchanges, prefix=f"{run_id}-")
    index = EdgeVectorIndex(db.workdir / f"qdrant-{run_id}")
    llm = LLMClient(max_concurrency_per_provider=scenario.ceiling, max_retries=DEFAULTS["llm_max_retries"])
    # The sizes as a deployment sets them: FORMATION_BATCH_SIZE, FORMATION_BATCHES_AHEAD.
    sized = {"formation_batch_size": scenario.batch_size, "formation_batches_ahead": scenario.ahead}
    service = bench_services(
        db,
        index=index,
        embedder=embedder,
        llm=llm,
        summarizer=cfg,
        **{name: value for name, value in sized.items() if value is not None},
    ).memory
    before = await server.stats(reset=True)
    start = time.perf_counter()
    report = await service.form_pending(personality_id=personality.id)
    elapsed = time.perf_counter() - start
    after = await server.stats()
    await index.close()
    assert report.memories == scenario.exchanges, report
    (limit,) = llm.concurrency_stats()
    return Run(
        scenario.exchanges / elapsed,
        after.refused,
        limit.congestion_signals,
        report.extractive,
        limit.level,
        after.peak_in_flight,
        (after.answered - before.answered) * server.latency / elapsed,
    )


async def run_formation(args: Args, embedder: Embedder, db: BenchDatabase) -> None:
    default_ceiling = DEFAULTS["llm_concurrency_per_provider"]
    servers = {"roomy": 64, "tight": 8}
    async with (
        BenchServer(latency=args.latency, limit=64, reply=SUMMARY, in_process=args.in_process) as roomy,
        BenchServer(latency=args.latency, limit=8, reply=SUMMARY, in_process=args.in_process) as tight,
    ):
        for server in (roomy, tight):  # litellm's first call (client set-up) is not timed either
            await LLMClient().complete(bench_model(server), [{"role": "user", "content": "warm up"}])
        scenarios = [Scenario("baseline, one at a time", roomy, args.baseline_exchanges, 1, 1)]
        for name in args.servers:
            server = roomy if servers[name] == 64 else tight
            scenarios += [
                Scenario(
                    f"default (ceiling {default_ceiling})",
                    server,
                    args.exchanges,
                    default_ceiling,
                    None,
                    args.ahead,
                ),
                Scenario(
                    f"high ceiling ({HIGH_CEILING})", server, args.exchanges, HIGH_CEILING, None, args.ahead
                ),
            ]
        print(
            f"{args.runs} runs per row; LLM latency {args.latency * 1000:.0f} ms; servers "
            + ("in this process" if args.in_process else "in child processes")
            + f"; {args.baseline_exchanges} exchanges per baseline run, {args.exchanges} per other run"
            + ("" if args.ahead is None else f"; {args.ahead} batches summarized ahead of the one written")
        )
        baseline = 0.0
        for number, scenario in enumerate(scenarios):
            results = [await form_once(db, embedder, scenario, f"s{number}r{i}") for i in range(args.runs)]
            rates = [r.rate for r in results]
            median = statistics.median(rates)
            baseline = baseline or median
            allowed = scenario.server.limit
            line = (
                f"server allows {allowed:>2} | {scenario.label:<24} {spread(rates)} exchanges/s "
                f"= {median / baseline:5.1f}x baseline"
            )
            if allowed == 8:
                line += f", {median / (allowed / args.latency):.2f}x the provider's limit"
            print(line)
            refused, retried = sum(r.refused for r in results), sum(r.signals for r in results)
            print(
                f"    429s seen {refused}, retried {retried}, "
                f"left unretried {sum(r.unretried for r in results)}; limit settled at "
                f"{[r.level for r in results]}, server peak in flight {[r.peak_in_flight for r in results]}, "
                f"mean in flight {[round(r.mean_in_flight, 1) for r in results]}; load {load_average()}"
            )


async def import_once(db: BenchDatabase, embedder: Embedder, dialogues: list[Dialogue], run_id: str) -> float:
    """Import every dialogue in verbatim mode for a fresh personality; exchanges per second."""
    index = EdgeVectorIndex(db.workdir / f"qdrant-{run_id}")
    transfer = bench_services(db, index=index, embedder=embedder).transfer
    personality, _ = await PersonalityService(db.sessionmaker).create(
        f"import-{run_id}", memory_mode=MemoryMode.VERBATIM
    )
    transcripts = []
    for dialogue in dialogues:
        path = db.workdir / f"{run_id}-{dialogue.name}.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in dialogue.lines) + "\n", encoding="utf-8")
        transcripts.append((dialogue, *read_transcript(path)))
    memories, elapsed = 0, 0.0
    for dialogue, lines, skipped in transcripts:
        start = time.perf_counter()
        report = await transfer.import_transcript(
            lines,
            personality=personality,
            default_user_id=dialogue.user_id,
            skipped_lines=skipped,
            mode=MemoryMode.VERBATIM,
        )
        elapsed += time.perf_counter() - start
        memories += report.formation.memories
    await index.close()
    return memories / elapsed


async def run_imports(args: Args, embedder: Embedder, db: BenchDatabase) -> None:
    dialogues = dev_dialogues() or [synthetic_dialogue()]
    exchanges = sum(1 for d in dialogues for line in d.lines if line["role"] == "assistant")
    rates = [await import_once(db, embedder, dialogues, f"v{i}") for i in range(args.verbatim_runs)]
    print(
        f"verbatim import of {', '.join(d.name for d in dialogues)} (~{exchanges} exchanges): "
        f"{spread(rates)} exchanges/s over {len(rates)} runs; load {load_average()}"
    )


@dataclass(frozen=True)
class Args:
    exchanges: int
    baseline_exchanges: int
    runs: int
    latency: float
    ahead: int | None
    servers: list[str]
    verbatim_runs: int
    in_process: bool


async def run(args: Args) -> None:
    # Each retried 429 is logged by the retry policy; the rows count them instead.
    logging.getLogger("memory.retry").setLevel(logging.ERROR)
    load_litellm()
    embedder = make_embedder(DEFAULTS["embedding_model"])
    await embedder.embed(["warm up the model"])
    print(f"load average at start {load_average()}")
    async with bench_database("ingest") as db:
        if args.servers:
            await run_formation(args, embedder, db)
        if args.verbatim_runs:
            await run_imports(args, embedder, db)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--exchanges", type=int, default=384)
    parser.add_argument("--baseline-exchanges", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--ahead", type=int, default=None, help="0: formation's stages one after the other")
    parser.add_argument("--servers", nargs="*", choices=("roomy", "tight"), default=["roomy", "tight"])
    parser.add_argument("--verbatim-runs", type=int, default=3, help="0: no verbatim import rows")
    parser.add_argument("--in-process", action="store_true", help="the test servers in this event loop")
    args = parser.parse_args()
    asyncio.run(run(Args(**vars(args))))


if __name__ == "__main__":
    main()
