"""Rolling summaries: thresholds, cumulative updates, new rows, atomic writes, titles."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.rolling import RollingSummarizer, fallback_title
from memory.conversations import LoggedMessage, Venue, ensure_conversation, reset_conversation, store_messages
from memory.formation.summarizer import EXTRACTIVE
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.types import MessageRole, ModelConfig
from models import Conversation, Message, Summary
from testkit.llm_server import LLMTestServer, Stall

# The sessionmaker fixture's type, named so that the tests' signatures keep to one line.
Sessions = async_sessionmaker[AsyncSession]
T0 = datetime(2025, 1, 1, tzinfo=UTC)
LINES = [
    "Alice told Lilith that her sister Leila moved to Porto in March.",
    "Lilith asked whether Leila took the cat Mochi along.",
    "Alice said Mochi went too, riding in the back seat.",
    "Lilith suggested a map of Porto's old town as a gift.",
    "Alice planned to visit on the 14th of April.",
    "Lilith promised to find the 1850 harbour map.",
    "Alice asked about the library's opening hours.",
    "Lilith said it opens at nine on weekdays.",
]


@pytest.fixture
def cfg(llm_server: LLMTestServer) -> ModelConfig:
    return ModelConfig(model="openai/test-summarizer", api_base=llm_server.base_url, api_key="t", timeout=3.0)


@pytest.fixture
def llm() -> LLMClient:
    return LLMClient(max_retries=0)


@pytest.fixture
async def conversation(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    personality, _ = await PersonalityService(sessionmaker).create("Lilith")
    async with sessionmaker.begin() as session:
        return await ensure_conversation(session, personality.id, Venue("1", "2", "3"))


counter = iter(range(1, 1_000_000))


async def add_messages(sessionmaker: async_sessionmaker[AsyncSession], conversation: int, n: int) -> None:
    messages = []
    for _ in range(n):
        i = next(counter)
        messages.append(
            LoggedMessage(
                external_id=f"m{i}",
                author_id="3",
                author_name="Alice",
                role=MessageRole.USER if i % 2 else MessageRole.ASSISTANT,
                content=LINES[i % len(LINES)],
                created_at=T0 + timedelta(minutes=i),
                token_count=15,
            )
        )
    async with sessionmaker.begin() as session:
        await store_messages(session, conversation, messages)


async def summaries(sessionmaker: async_sessionmaker[AsyncSession], conversation: int) -> list[Summary]:
    async with sessionmaker() as session:
        return list(
            (
                await session.scalars(
                    select(Summary).where(Summary.conversation_id == conversation).order_by(Summary.id)
                )
            ).all()
        )


def rolling(sessionmaker: Sessions, llm: LLMClient, **kwargs: Any) -> RollingSummarizer:
    options = {"threshold_tokens": 60, "min_messages": 4, "max_tokens": 400, "input_tokens": 3000}
    options.update(kwargs)
    return RollingSummarizer(sessionmaker, llm, **options)


async def test_not_due_below_thresholds(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    summarizer = rolling(sessionmaker, llm, threshold_tokens=100, min_messages=3)
    await add_messages(sessionmaker, conversation, 2)  # 30 tokens, 2 messages: neither threshold
    assert await summarizer.maybe_update(conversation, cfg=cfg) is None
    await add_messages(sessionmaker, conversation, 2)  # 60 tokens, 4 messages: tokens still short
    assert await summarizer.maybe_update(conversation, cfg=cfg) is None
    summarizer.threshold_tokens = 50
    summarizer.min_messages = 10  # enough tokens, too few messages
    assert await summarizer.maybe_update(conversation, cfg=cfg) is None
    assert llm_server.requests == []
    summarizer.min_messages = 4
    assert await summarizer.maybe_update(conversation, cfg=cfg) is not None


async def test_first_summary_records_its_range_and_a_title(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: (
        "Porto move" if "title" in body["messages"][0]["content"] else "Alice's sister Leila moved to Porto."
    )
    await add_messages(sessionmaker, conversation, 5)
    update = await rolling(sessionmaker, llm).maybe_update(conversation, cfg=cfg, personality_name="Lilith")
    assert update is not None and update.created
    [row] = await summaries(sessionmaker, conversation)
    assert row.content == "Alice's sister Leila moved to Porto."
    assert row.message_count == 5 and row.summarizer == "openai/test-summarizer"
    assert row.last_message_id - row.first_message_id == 4
    async with sessionmaker() as session:
        assert (await session.get(Conversation, conversation)).title == "Porto move"  # type: ignore[union-attr]


async def test_cumulative_update_then_new_row(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    summaries_said = iter(["First summary.", "Updated summary with the new messages.", "A fresh row."])
    llm_server.responder = lambda body: (
        "A title" if "title" in body["messages"][0]["content"] else next(summaries_said)
    )
    summarizer = rolling(sessionmaker, llm, max_tokens=400)
    await add_messages(sessionmaker, conversation, 4)
    first = await summarizer.maybe_update(conversation, cfg=cfg)
    await add_messages(sessionmaker, conversation, 4)
    second = await summarizer.maybe_update(conversation, cfg=cfg)
    assert first is not None and second is not None
    assert not second.created and second.summary_id == first.summary_id
    [row] = await summaries(sessionmaker, conversation)
    assert row.content == "Updated summary with the new messages."
    assert row.first_message_id == first.first_message_id
    assert row.message_count == 8 and row.last_message_id > first.last_message_id
    # The update saw the previous summary and only the new messages.
    prompt = [r for r in llm_server.requests if "title" not in r["messages"][0]["content"]][-1]
    user = prompt["messages"][-1]["content"]
    assert "Previous summary:\nFirst summary." in user
    assert user.count("\n") < 12
    # Once the summary is over its maximum, the next pass starts a new row covering only new messages.
    summarizer.max_tokens = 3
    await add_messages(sessionmaker, conversation, 4)
    third = await summarizer.maybe_update(conversation, cfg=cfg)
    assert third is not None and third.created
    old, new = await summaries(sessionmaker, conversation)
    assert new.first_message_id == old.last_message_id + 1 and new.message_count == 4
    assert new.content == "A fresh row."


async def test_input_is_cut_keeping_the_most_recent_messages(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    await add_messages(sessionmaker, conversation, 40)
    await rolling(sessionmaker, llm, input_tokens=60).maybe_update(conversation, cfg=cfg)
    user = llm_server.requests[0]["messages"][-1]["content"]
    transcript = user.split("\n\nSummarize", 1)[0]
    assert 0 < transcript.count("\n") < 10
    # The last message stored is the last line summarized.
    async with sessionmaker() as session:
        last = await session.scalar(
            select(Message.content).where(Message.conversation_id == conversation).order_by(Message.id.desc())
        )
    assert last and transcript.splitlines()[-1].endswith(last)


async def test_interrupted_update_leaves_the_previous_summary(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Stable summary."
    summarizer = rolling(sessionmaker, llm)
    await add_messages(sessionmaker, conversation, 4)
    assert await summarizer.maybe_update(conversation, cfg=cfg) is not None
    before = [(s.id, s.content, s.last_message_id) for s in await summaries(sessionmaker, conversation)]
    await add_messages(sessionmaker, conversation, 4)
    llm_server.script(Stall(30))
    requests = len(llm_server.requests)
    task = asyncio.create_task(summarizer.maybe_update(conversation, cfg=cfg))
    while len(llm_server.requests) == requests:  # noqa: ASYNC110 - the request is the signal to wait for
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = [(s.id, s.content, s.last_message_id) for s in await summaries(sessionmaker, conversation)]
    assert after == before


async def test_reset_during_a_pass_wins(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    summarizer = rolling(sessionmaker, llm)
    await add_messages(sessionmaker, conversation, 4)
    assert await summarizer.maybe_update(conversation, cfg=cfg) is not None
    await add_messages(sessionmaker, conversation, 4)

    def reset_then_answer(body: dict[str, Any]) -> str:
        return "late summary"

    llm_server.responder = reset_then_answer
    original = summarizer._summarize

    async def summarize_then_reset(*args: Any) -> tuple[str, str]:
        result = await original(*args)
        async with sessionmaker.begin() as session:
            row = await session.get(Conversation, conversation)
            assert row is not None
            await reset_conversation(session, row.personality_id, Venue("1", "2", "3"))
        return result

    summarizer._summarize = summarize_then_reset  # type: ignore[method-assign, assignment]
    assert await summarizer.maybe_update(conversation, cfg=cfg) is None
    assert await summaries(sessionmaker, conversation) == []


async def test_extractive_without_a_model(
    sessionmaker: Sessions, llm: LLMClient, conversation: int, llm_server: LLMTestServer
) -> None:
    await add_messages(sessionmaker, conversation, 8)
    update = await rolling(sessionmaker, llm, max_tokens=60).maybe_update(conversation, cfg=None)
    assert update is not None and update.summarizer == EXTRACTIVE
    [row] = await summaries(sessionmaker, conversation)
    assert row.content and "Porto" in row.content
    assert update.title and len(update.title) <= 80
    assert llm_server.requests == []


def test_fallback_title() -> None:
    assert fallback_title("Alice planned a trip to Porto. Then more.") == "Alice planned a trip to Porto"
    assert len(fallback_title("word " * 100)) <= 80


async def exchanges(
    sessionmaker: async_sessionmaker[AsyncSession], conversation: int, lines: list[str]
) -> None:
    """User lines and the replies to them, alternating, each reply linked to the line it answers."""
    messages: list[LoggedMessage] = []
    for i, line in enumerate(lines):
        n = next(counter)
        user = i % 2 == 0
        messages.append(
            LoggedMessage(
                external_id=f"x{n}",
                author_id="3" if user else "personality:lilith",
                author_name="Alice" if user else "Lilith",
                role=MessageRole.USER if user else MessageRole.ASSISTANT,
                content=line,
                created_at=T0 + timedelta(minutes=n),
                token_count=15,
                reply_to=None if user else messages[-1].external_id,
            )
        )
    async with sessionmaker.begin() as session:
        await store_messages(session, conversation, messages)


async def test_after_a_reply_the_latest_exchange_waits_for_the_next_update(
    sessionmaker: Sessions, llm: LLMClient, cfg: ModelConfig, conversation: int, llm_server: LLMTestServer
) -> None:
    """The latest reply may still be regenerated: a summary holds only answers that stay."""
    summarizer = rolling(sessionmaker, llm, min_messages=2, threshold_tokens=1)
    await exchanges(sessionmaker, conversation, LINES[:6])
    first = await summarizer.maybe_update(conversation, cfg=cfg, settled_only=True)
    assert first is not None and first.message_count == 4
    async with sessionmaker() as session:
        ids = list(
            (
                await session.scalars(
                    select(Message.id).where(Message.conversation_id == conversation).order_by(Message.id)
                )
            ).all()
        )
    assert (first.first_message_id, first.last_message_id) == (ids[0], ids[3])
    summarized = llm_server.requests[-2]["messages"][-1]["content"]  # the title request comes last
    assert LINES[3] in summarized and LINES[4] not in summarized and LINES[5] not in summarized
    # Nothing new but the held-back exchange: not due. Once a newer reply exists, it goes in.
    assert await summarizer.maybe_update(conversation, cfg=cfg, settled_only=True) is None
    await exchanges(sessionmaker, conversation, LINES[6:8])
    second = await summarizer.maybe_update(conversation, cfg=cfg, settled_only=True)
    assert second is not None and second.last_message_id == ids[5]
