"""The bot's resident memory with the local embedder (issue 12: under 600 MB), measured on the process
`personae run` builds: the runtime from `open_runtime` (database pool, vector index, embedder, LLM
client, services) and the bot on it with every cog loaded, then answering chat messages in a shared
channel (recall, the LLM call over HTTP, storing, formation and rolling summaries after each reply).

The memories are loaded first, in bulk, by a child process (as `bench.recall` loads them), so the bot
process starts as it would on a populated deployment: only the bot's own memory is measured. PostgreSQL
and the LLM test server are processes of their own, as in production; their memory is not the bot's.
Nothing connects to Discord (no token here): the gateway's caches for a few guilds are not counted.

    .venv/bin/python -m bench.rss [--memories 100000] [--users 1000] [--messages 200]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import bench_parser, load_average

BENCH = "bench"
CHANNEL, GUILD = "c1", "g1"
REPLY = "That sounds lovely. I remember you told me about your garden before; how are the tomatoes?"


def memory_status() -> dict[str, float]:
    """This process's resident memory now (VmRSS), its peak so far (VmHWM), and the resident memory's
    two kinds: private (RssAnon: the heap, the model, the index's structures) and file-backed
    (RssFile: mapped files, such as the index's segments, that the kernel can drop and read again), in MB."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM", "RssAnon", "RssFile")}


def describe_memory(stage: str) -> None:
    now = memory_status()
    print(
        f"  {stage}: RSS {now['VmRSS']:.0f} MB (private {now['RssAnon']:.0f}, "
        f"file-backed {now['RssFile']:.0f}), peak {now['VmHWM']:.0f} MB"
    )


def _load(url: str, data_dir: str, memories: int, users: int) -> None:
    """In a child process: the personality and `memories` memories, written and indexed in bulk."""
    asyncio.run(_load_async(url, Path(data_dir), memories, users))


async def _load_async(url: str, data_dir: Path, memories: int, users: int) -> None:
    from bench._common import BenchDatabase, BenchMemory, bench_services
    from bench.recall import load
    from memory.recall.edge import EdgeVectorIndex
    from memory.recall.local_embedder import LocalEmbedder
    from models.database import create_engine, create_sessionmaker

    engine = create_engine(url)
    embedder = LocalEmbedder()
    index = EdgeVectorIndex(data_dir / "qdrant", optimize_after=memories + 1)
    try:
        await index.ensure_collection(embedder.dimension)
        db = BenchDatabase(engine=engine, sessionmaker=create_sessionmaker(engine), workdir=data_dir)
        memory = BenchMemory(db, index, embedder, bench_services(db, index=index, embedder=embedder))
        personality, _ = await memory.personalities.create(BENCH, memory_mode="summarized")
        await load(memory, personality.id, memories, lambda n: f"user{n % users}")
        await index.optimize()
    finally:
        await index.close()
        await engine.dispose()


async def serve_chat(data_dir: Path, url: str, base_url: str, messages: int, users: int) -> None:
    """The bot as `personae run` builds it, answering `messages` chat messages; RSS at each stage."""
    from bot.client import PersonaeBot
    from bot.runtime import open_runtime
    from bot.settings import load_bot_settings
    from memory.chat.service import ChatRequest
    from testkit.chat import ReplyRecorder

    describe_memory("interpreter, before the runtime")
    settings = load_bot_settings(
        database_url=url,
        qdrant_url=None,
        personae_data_dir=data_dir,
        chat_model="openai/bench-chat",
        chat_api_base=base_url,
        chat_api_key="bench",
        summarizer_model="openai/bench-summarizer",
        summarizer_api_base=base_url,
        summarizer_api_key="bench",
        log_level="WARNING",
    )
    async with open_runtime(settings) as runtime, PersonaeBot(runtime=runtime) as bot:
        await bot.setup_hook()  # every cog and the command tree, as at login
        describe_memory("runtime open, bot built, cogs loaded")
        personality = await runtime.personalities.get(BENCH)
        assert personality is not None
        await runtime.bindings.bind(
            personality_id=personality.id, channel_id=CHANNEL, guild_id=GUILD, user_id="a"
        )
        started = time.perf_counter()
        for i in range(messages):
            user = f"user{i % users}"
            turn = await runtime.chat.answer(
                ChatRequest(
                    personality_id=personality.id,
                    user_id=user,
                    user_name=user,
                    guild_id=GUILD,
                    channel_id=CHANNEL,
                    message_id=f"m-{i}",
                    text=f"Do you remember what I told you about my garden and the tomatoes? ({i})",
                ),
                ReplyRecorder(f"r-{i}"),
            )
            assert turn.reply.ok, turn.reply.text
            if i + 1 in (1, messages // 2, messages):
                describe_memory(f"after {i + 1} chat messages answered and remembered")
        elapsed = time.perf_counter() - started
        formed = await runtime.memory.pending_message_count(personality_id=personality.id)
        print(f"  {messages} messages in {elapsed:.1f} s; messages still pending formation: {formed}")
    print(f"peak RSS of the bot process: {memory_status()['VmHWM']:.0f} MB; load average {load_average()}")


async def run(memories: int, users: int, messages: int) -> None:
    from bench.llm_servers import BenchServer
    from models.database import create_engine, start_embedded_postgres
    from models.migrate import upgrade_database

    with tempfile.TemporaryDirectory(prefix="personae-rss-") as tmp:
        data_dir = Path(tmp)
        url = start_embedded_postgres(data_dir / "pg", database="bench_rss")
        engine = create_engine(url)
        await upgrade_database(engine)
        await engine.dispose()
        t = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        loader = context.Process(target=_load, args=(url, str(data_dir), memories, users))
        loader.start()
        await asyncio.to_thread(loader.join)
        if loader.exitcode != 0:
            raise SystemExit(f"bench.rss: loading the memories failed (exit {loader.exitcode})")
        print(
            f"loaded {memories:,} memories of {users:,} users in a child process "
            f"in {time.perf_counter() - t:.0f} s"
        )
        # One reply for chat and summaries alike: the bench measures memory, not the model's words.
        async with BenchServer(latency=0.05, limit=64, reply=REPLY, in_process=False) as server:
            await serve_chat(data_dir, url, server.base_url, messages, users)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.memories, args.users, args.messages))


if __name__ == "__main__":
    main()
