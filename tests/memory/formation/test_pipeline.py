"""Formation as a pipeline: a batch is written and indexed while the next ones are summarized, and
nothing is formed twice or lost on the way. Real PostgreSQL (pooled, real commits), Qdrant Edge, the
local embedder, and the summarizer over HTTP. No timings: the test server holds chosen answers until
an event of the pipeline happened, so a formation that ran its stages one after the other would
wait for itself (and the holds give up after a minute, which the tests then report)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.llm import LLMClient
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.service import MemoryService
from memory.types import IndexPoint, ModelConfig
from models import Memory
from testkit.llm_server import LLMTestServer
from testkit.memory_service import add_chat, add_personality, make_service

HOLD_LIMIT = 60.0  # a held answer is sent anyway after this long, and the test fails on it
_STORY = re.compile(r'<exchange n="\d+"[^>]*>\n[^\n]*?story #(\d+)')


def story(n: int) -> tuple[tuple[str, str], tuple[str, str]]:
    """Exchange n: long enough to be summarized, its number after 'story #' (context repeats it)."""
    return (
        (
            "user",
            f"story #{n}: my neighbour Rosa adopted a grey kitten called Pip number {n} and it "
            "climbs the curtains every single night while we try to sleep, honestly exhausting",
        ),
        ("assistant", f"Pip number {n} sounds like a handful! Maybe Rosa could get a scratching post."),
    )


def chat_of(numbers: Sequence[int]) -> list[tuple[str, str]]:
    return [turn for n in numbers for turn in story(n)]


class HoldingServer(LLMTestServer):
    """The test server, noting when each exchange's request arrives and is answered, and holding the
    answer to a request until the events of its exchanges are set (`holds`). A request may hold
    several exchanges (a batch of one user's): each is answered under its number."""

    def __init__(self) -> None:
        super().__init__(responder=self._summary)
        self.holds: dict[int, asyncio.Event] = {}
        self.arrived: dict[int, asyncio.Event] = {}
        self.log: list[str] = []
        self.held_too_long: list[int] = []

    @staticmethod
    def _summary(body: dict[str, Any]) -> str:
        return "\n".join(
            f"[{i}] Rosa's kitten Pip number {n} climbs the curtains at night."
            for i, n in enumerate(exchanges_asked(body), start=1)
        )

    def arrival(self, n: int) -> asyncio.Event:
        return self.arrived.setdefault(n, asyncio.Event())

    async def _apply_script(self, request: web.Request) -> Any:
        asked = exchanges_asked(await request.json())  # aiohttp keeps the body read: it reads it again
        for n in asked:
            self.log.append(f"arrived {n}")
            self.arrival(n).set()
        for n in asked:
            if n in self.holds:
                try:
                    await asyncio.wait_for(self.holds[n].wait(), HOLD_LIMIT)
                except TimeoutError:
                    self.held_too_long.append(n)
        reply = await super()._apply_script(request)
        self.log.extend(f"answered {n}" for n in asked)
        return reply


def exchanges_asked(body: dict[str, Any]) -> list[int]:
    """The story numbers of the exchanges a request asks memories of (not those of its context)."""
    found = [int(n) for n in _STORY.findall(body["messages"][-1]["content"])]
    assert found, body
    return found


class ObservedIndex:
    """The real index, noting each upsert in the server's log; `fail_on` upserts raise instead."""

    def __init__(self, inner: VectorIndex, log: list[str], fail_on: Collection[int] = ()) -> None:
        self.inner = inner
        self.log = log
        self.fail_on = fail_on
        self.points: list[IndexPoint] = []
        self.upserts = 0
        self.indexed = asyncio.Event()  # set once two points (the first batch) are in

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        self.upserts += 1
        if self.upserts in self.fail_on:
            raise ConnectionError("the index went away")
        await self.inner.upsert(points)
        self.points.extend(points)
        self.log.append(f"indexed {len(self.points)}")
        if len(self.points) >= 2:
            self.indexed.set()


class FailingEmbedder:
    """The real embedder, but its `fail_on`-th call raises."""

    def __init__(self, inner: Embedder, fail_on: Collection[int] = ()) -> None:
        self.inner = inner
        self.fail_on = fail_on
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError("the embedder went away")
        return await self.inner.embed(texts)


@pytest.fixture
async def server() -> AsyncIterator[HoldingServer]:
    server = HoldingServer()
    server.latency = 0.02
    async with server:
        yield server


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[VectorIndex]:
    index = EdgeVectorIndex(tmp_path / "qdrant")
    yield index
    await index.close()


def cfg_of(server: LLMTestServer) -> ModelConfig:
    # A held answer must not time out on the client's side: the hold is the test's own clock.
    return ModelConfig(model="openai/test-summarizer", api_base=server.base_url, api_key="k", timeout=120)


def worker(
    sessionmaker: async_sessionmaker[AsyncSession],
    index: Any,
    embedder: Embedder,
    server: LLMTestServer,
) -> MemoryService:
    # Four calls in flight from the start: the first two batches summarize at once.
    llm = LLMClient(max_retries=0, initial_concurrency=4, max_concurrency_per_provider=16)
    return make_service(sessionmaker, index, embedder, llm, cfg_of(server), batch_size=2, numbering=True)


async def memory_rows(sessionmaker: async_sessionmaker[AsyncSession]) -> list[Memory]:
    async with sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


async def test_a_batch_is_written_and_indexed_while_the_next_is_summarized(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    server: HoldingServer,
) -> None:
    """Batches of two: exchanges 0-1, 2-3, 4-5. The first batch's answers are held until exchange 3's
    request arrived (so the second batch was already summarizing), and exchange 3's answer is held
    until the first batch is in the index: run one after the other, the stages would wait for each
    other until the holds gave up."""
    observed = ObservedIndex(index, server.log)
    service = worker(committed_sessionmaker, observed, embedder, server)
    p = await add_personality(committed_sessionmaker, "Sage", "summarized")
    await add_chat(committed_sessionmaker, p, chat_of(range(6)))
    server.holds = {0: server.arrival(3), 1: server.arrival(3), 3: observed.indexed}

    report = await service.form_pending()

    assert server.held_too_long == []
    log = server.log
    assert log.index("arrived 3") < log.index("indexed 2") < log.index("answered 3")
    assert report.memories == 6 and report.extractive == 0
    rows = await memory_rows(committed_sessionmaker)
    assert [r.summarizer for r in rows] == ["openai/test-summarizer"] * 6
    assert [r.state for r in rows] == ["indexed"] * 6
    assert sorted(len(r.source_message_ids) for r in rows) == [2] * 6
    # Read ahead past the batches in flight, never into them; each batch of one user's in one call.
    assert sorted(n for r in server.requests for n in exchanges_asked(r)) == list(range(6))
    assert len(server.requests) == 3
    assert await service.pending_message_count() == 0


async def test_concurrent_passes_and_workers_form_each_exchange_once(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    server: HoldingServer,
) -> None:
    first, second = (worker(committed_sessionmaker, index, embedder, server) for _ in range(2))
    conversations = []
    for n in range(3):
        p = await add_personality(committed_sessionmaker, f"p{n}", "summarized")
        conversations.append(await add_chat(committed_sessionmaker, p, chat_of(range(n * 10, n * 10 + 5))))

    reports = await asyncio.gather(
        first.form_pending(),
        second.form_pending(),
        first.form_pending(conversation_id=conversations[0]),
        second.form_pending(conversation_id=conversations[2]),
    )

    assert sum(r.memories for r in reports) == 15
    asked = [n for r in server.requests for n in exchanges_asked(r)]
    assert sorted(asked) == sorted(set(asked)) and len(asked) == 15  # no exchange summarized twice
    rows = await memory_rows(committed_sessionmaker)
    sources = [(r.conversation_id, source) for r in rows for source in r.source_message_ids]
    assert len(rows) == 15 and len(sources) == len(set(sources)) == 30
    assert await first.pending_message_count() == 0


@pytest.mark.parametrize("stage", ["embedding", "index"])
async def test_a_failed_write_leaves_its_batch_for_the_next_pass_which_forms_it_once(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    index: VectorIndex,
    embedder: Embedder,
    server: HoldingServer,
    stage: str,
) -> None:
    """The second batch's write fails (its embedding, or its index upsert after the commit) while
    the third is summarizing: the first stays formed, the third is dropped and stays pending, and
    the next pass (the claim released) forms what is left, each exchange exactly once."""
    failing_index = ObservedIndex(index, server.log, fail_on={2} if stage == "index" else ())
    failing_embedder = FailingEmbedder(embedder, fail_on={2} if stage == "embedding" else ())
    service = worker(committed_sessionmaker, failing_index, failing_embedder, server)
    p = await add_personality(committed_sessionmaker, "Sage", "summarized")
    await add_chat(committed_sessionmaker, p, chat_of(range(6)))

    with pytest.raises(ConnectionError if stage == "index" else RuntimeError):
        await service.form_pending()
    written = {r.id: r.state for r in await memory_rows(committed_sessionmaker)}
    if stage == "embedding":
        assert sorted(written.values()) == ["indexed"] * 2
        assert await service.pending_message_count() == 8
    else:  # written and marked, not yet searchable: the next pass indexes it
        assert sorted(written.values()) == ["formed"] * 2 + ["indexed"] * 2
        assert await service.pending_message_count() == 4

    report = await service.form_pending()

    rows = await memory_rows(committed_sessionmaker)
    assert report.memories == 6 - len(written)
    assert {r.id for r in rows} >= set(written)
    sources = [source for r in rows for source in r.source_message_ids]
    assert len(rows) == 6 and len(sources) == len(set(sources)) == 12
    assert [r.state for r in rows] == ["indexed"] * 6
    assert await service.pending_message_count() == 0
    async with committed_sessionmaker() as session:
        assert await session.scalar(select(func.count(Memory.id))) == 6
