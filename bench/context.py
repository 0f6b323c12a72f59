"""The bot's own overhead per chat message, everything but the LLM call, with 100k memories stored.

Per message, through the chat turn the bot runs (ChatService.answer): routing (personality names,
bindings), storing the user's message, loading the personality, recalling memories (query embedding +
hybrid search + PostgreSQL read), reading the rolling summary and recent history, and counting tokens
with the model's tokenizer to fit the budget: everything until the model is called (the chat model is
the OpenAI-compatible test server, answering at once). Storing the reply, memory formation and rolling
summaries come after the reply is delivered and are not timed. Conversations are pre-filled with
history so the budget has work to do.

    .venv/bin/python -m bench.context [--memories 100000] [--messages 300] [--users 1000] [--runs 3]
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta

from bench._common import bench_memory, bench_parser, load_average, percentile, spread
from bench.recall import QUERIES, load
from memory.chat.service import ChatReply, ChatRequest, ChatService
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.tokens import count_tokens
from memory.types import MessageRole
from testkit.chat import ReplyRecorder
from testkit.llm_server import LLMTestServer

CHANNELS = 20
HISTORY = 60
MODEL = "openai/gpt-4o-mini"
PARTS = ("total overhead", "routing", "store + recall + prompt")
REPLY = "That sounds wonderful. Tell me more about it, I remember you mentioned something similar before."


async def prefill(chat: ChatService, sessionmaker, personality_id: int, users: int) -> None:  # type: ignore[no-untyped-def]
    t0 = datetime(2024, 6, 1, tzinfo=UTC)
    rng = random.Random(7)
    for channel in range(CHANNELS):
        venue = Venue(guild_id="g1", channel_id=f"c{channel}", user_id="user0")
        messages = []
        for i in range(HISTORY):
            user = f"user{rng.randrange(users)}"
            role = MessageRole.USER if i % 2 == 0 else MessageRole.ASSISTANT
            text = rng.choice(QUERIES) + " " + " ".join(rng.choice(QUERIES) for _ in range(6))
            messages.append(
                LoggedMessage(
                    external_id=f"h{channel}-{i}",
                    author_id=user if role is MessageRole.USER else "personality:bench",
                    author_name=user,
                    role=role,
                    content=text,
                    created_at=t0 + timedelta(minutes=i),
                    token_count=count_tokens(text, MODEL),
                )
            )
        async with sessionmaker.begin() as session:
            conversation = await ensure_conversation(session, personality_id, venue)
            await store_messages(session, conversation, messages)


class PromptTimer(ReplyRecorder):
    """Notes when the prompt is ready: the turn holds `writing` from just before the model's call."""

    def __init__(self, reply_id: str) -> None:
        super().__init__(reply_id)
        self.ready = 0.0
        self.tokens = 0

    def writing(self) -> AbstractAsyncContextManager[None]:
        self.ready = time.perf_counter()
        return super().writing()

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        assert reply.ok and reply.prepared.context is not None, reply.text
        self.tokens = reply.prepared.context.tokens
        return await super().deliver(reply)


async def run(memories: int, messages: int, users: int, passes: int) -> None:
    count_tokens("warm up the tokenizer", MODEL)
    async with (
        LLMTestServer(responder=lambda body: REPLY) as server,
        # The chat model's tokenizer and window, its calls answered at once by the test server.
        bench_memory(
            "context",
            optimize_after=memories + 1,
            chat_model=MODEL,
            chat_api_base=server.base_url,
            chat_api_key="bench",
        ) as memory,
    ):
        db = memory.db
        personality, _ = await memory.personalities.create(
            "bench", prompt="You are Bench, a patient listener. " * 20, memory_mode="summarized"
        )
        t = time.perf_counter()
        await load(memory, personality.id, memories, lambda number: f"user{number % users}")
        await memory.index.optimize()
        print(f"loaded {memories:,} memories ({users} users) in {time.perf_counter() - t:.1f} s")
        chat = memory.services.chat
        await prefill(chat, db.sessionmaker, personality.id, users)
        bindings = memory.bindings
        for channel in range(0, CHANNELS, 2):  # half the channels bound, half addressed by name
            await bindings.bind(
                personality_id=personality.id, channel_id=f"c{channel}", guild_id="g1", user_id="a"
            )
        rng = random.Random(11)
        warm_up = 20  # messages not counted: connection pool, caches
        runs: list[dict[str, list[float]]] = []
        tokens: list[int] = []
        for i in range(warm_up + messages * passes):
            if i >= warm_up and (i - warm_up) % messages == 0:
                runs.append({part: [] for part in PARTS})
            number = rng.randrange(CHANNELS)
            channel_id = f"c{number}"
            user = f"user{rng.randrange(users)}"
            # Bound channels need no name (routing reads the bindings); the others name the personality.
            text = f"{rng.choice(QUERIES)}?" if number % 2 == 0 else f"Bench, {rng.choice(QUERIES)}?"
            started = time.perf_counter()
            route = await chat.route(text, channel_ids=[channel_id])
            assert route is not None
            routed = time.perf_counter()
            timer = PromptTimer(f"reply-{i}")
            request = ChatRequest(
                personality_id=route.personality.id,
                user_id=user,
                user_name=user,
                guild_id="g1",
                channel_id=channel_id,
                message_id=f"bench-{i}",
                text=text,
            )
            await chat.answer(request, timer)
            if not runs:
                continue
            for part, seconds in zip(
                PARTS, (timer.ready - started, routed - started, timer.ready - routed), strict=True
            ):
                runs[-1][part].append(seconds)
            tokens.append(timer.tokens)
        print(
            f"per message, {passes} passes of {messages} messages, {CHANNELS} channels with {HISTORY}+ "
            f"messages of history; median (min, max) over the passes; load average {load_average()}"
        )
        for part in PARTS:
            p50 = spread([1000 * percentile(run[part], 0.5) for run in runs], 2)
            p95 = spread([1000 * percentile(run[part], 0.95) for run in runs], 2)
            print(f"  {part:<24} p50 {p50} ms, p95 {p95} ms")
        print(f"  prompt tokens: mean {sum(tokens) / len(tokens):.0f} (budget {int(8192 * 0.75)})")


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3, help="passes of --messages messages")
    args = parser.parse_args()
    asyncio.run(run(args.memories, args.messages, args.users, args.runs))


if __name__ == "__main__":
    main()
