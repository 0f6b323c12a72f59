"""Regenerating a reply through the chat service: the same message answered again, the reply's rows
replaced (never a second reply), the memory and the rolling summary holding only the answer that stays.
Real PostgreSQL, Qdrant Edge, embedder, and the chat and summarizer LLMs over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.runtime import Runtime
from memory.chat.regenerate import BUSY, GONE, NOT_LATEST, NOT_YOURS
from memory.chat.service import ChatTurn
from memory.errors import UserFacingError
from models import Personality, Summary
from testkit.chat import ReplyRecorder, chat_request
from testkit.llm_server import Fail, LLMTestServer
from tests.memory.chat.memories import remembered
from tests.memory.chat.turns import answer, stored

ALICE = "1001"


async def answer_again(
    runtime: Runtime,
    conversation_id: int,
    message_id: str,
    *part_ids: str,
    user_id: str = ALICE,
    release: asyncio.Event | None = None,
) -> ChatTurn:
    """🔄 as the service takes it: the message as a request to answer again, then the one chat turn; the
    new answer goes out as these message ids (split at blank lines, one part each)."""
    req = await runtime.chat.request_again(
        conversation_id=conversation_id, message_id=message_id, user_id=user_id
    )
    turn: ChatTurn = await runtime.chat.answer(req, ReplyRecorder(*part_ids, release=release))
    return turn


async def test_rows_are_replaced_and_the_exchange_remembered_from_the_new_answer(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Part one about owls.\n\nPart two about owls."
    first = chat_request(lilith.id, "Tell me about the owls in the tower.")
    turn = await answer(runtime, first, "p1", "p2")
    conversation_id = turn.reply.prepared.conversation_id
    [old] = await remembered(runtime.transfer, ALICE)
    assert "owls" in old["content"]

    # Fewer parts: the first row keeps its id with the new text, the second goes.
    llm_server.responder = lambda body: "Only ravens live in the tower."
    again = await answer_again(runtime, conversation_id, first.message_id, "p1")
    assert again.reply.ok and again.reply.text == "Only ravens live in the tower."
    assert again.reply.prepared.request.replaces == ("p1", "p2")
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("p1", "Only ravens live in the tower.")]
    # The old answer's memory is gone; the turn formed the exchange anew from the answer that stays.
    assert again.after is not None and again.after.remembered_message_ids == [first.message_id]
    [new] = await remembered(runtime.transfer, ALICE)
    assert (
        "ravens" in new["content"]
        and "owls in the tower" in new["content"]
        and "Part one" not in new["content"]
    )

    # More parts: the new ones answer the same message (their link is what memories follow).
    llm_server.responder = lambda body: "Ravens, first.\n\nRavens, second."
    await answer_again(runtime, conversation_id, first.message_id, "p1", "p3")
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("p1", "Ravens, first."), ("p3", "Ravens, second.")]
    assert rows[0].reply_to_id is not None and rows[1].reply_to_id == rows[0].reply_to_id
    [latest] = await remembered(runtime.transfer, ALICE)
    assert latest["source_message_ids"] == [first.message_id, "p1", "p3"]
    assert "Ravens, second." in latest["content"] and "Only ravens" not in latest["content"]


async def test_a_failed_model_leaves_the_old_answer(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "The owls sleep by day."
    first = chat_request(lilith.id, "When do the owls sleep?")
    turn = await answer(runtime, first, "o1")
    conversation_id = turn.reply.prepared.conversation_id
    runtime.llm.retry.backoff_base = 0.0
    llm_server.script(Fail(503), Fail(503))
    again = await answer_again(runtime, conversation_id, first.message_id, "o1")
    assert not again.reply.ok and again.after is None
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("o1", "The owls sleep by day.")]
    [kept] = await remembered(runtime.transfer, ALICE)
    assert "sleep by day" in kept["content"]


async def test_the_rolling_summary_only_holds_the_answer_that_stays(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    runtime.chat._rolling.threshold_tokens = 1
    runtime.chat._rolling.min_messages = 2
    llm_server.responder = lambda body: (
        "A title" if body["model"] == "test-summarizer" else "The map room opens at nine."
    )
    first = chat_request(lilith.id, "When does the map room open?")
    turn = await answer(runtime, first, "r1")
    conversation_id = turn.reply.prepared.conversation_id
    # The latest reply can still change: it waits for the next update.
    assert turn.after is not None and turn.after.summary is None
    llm_server.responder = lambda body: (
        "A title" if body["model"] == "test-summarizer" else "The map room opens at ten."
    )
    await answer_again(runtime, conversation_id, first.message_id, "r1")
    turn = await answer(runtime, chat_request(lilith.id, "And the archive?"), "r2")
    report = turn.after
    assert report is not None and report.summary is not None and report.summary.message_count == 2
    summarized = [r for r in llm_server.requests if r["model"] == "test-summarizer"]
    transcripts = " ".join(str(m["content"]) for r in summarized for m in r["messages"])
    assert "opens at ten" in transcripts and "opens at nine" not in transcripts
    # The reply it now holds can no longer be regenerated.
    with pytest.raises(UserFacingError, match=NOT_LATEST):
        await runtime.chat.request_again(
            conversation_id=conversation_id, message_id=first.message_id, user_id=ALICE
        )


async def test_a_reply_already_in_a_summary_is_refused(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """A summary made before replies were held back from it (an older deployment) is respected."""
    first = chat_request(lilith.id, "Hello there.")
    turn = await answer(runtime, first, "s1")
    conversation_id = turn.reply.prepared.conversation_id
    [row] = await stored(runtime, conversation_id, role="assistant")
    async with runtime.sessionmaker.begin() as session:
        session.add(
            Summary(
                conversation_id=conversation_id,
                content="Alice said hello.",
                token_count=5,
                first_message_id=row.id - 1,
                last_message_id=row.id,
                message_count=2,
                summarizer="test",
            )
        )
    asked = len(llm_server.requests)
    with pytest.raises(UserFacingError, match="summary"):
        await answer_again(runtime, conversation_id, first.message_id, "s1")
    assert len(llm_server.requests) == asked


async def test_refusals_name_the_reason(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    first = chat_request(lilith.id, "Hello there.")
    turn = await answer(runtime, first, "n1")
    where: dict[str, Any] = {
        "conversation_id": turn.reply.prepared.conversation_id,
        "message_id": first.message_id,
    }
    with pytest.raises(UserFacingError, match=NOT_YOURS):
        await runtime.chat.request_again(**where, user_id="someone-else")
    with pytest.raises(UserFacingError, match=GONE):
        await runtime.chat.request_again(**(where | {"message_id": "never-said"}), user_id=ALICE)
    # A message that got no reply (the model failed) has nothing to regenerate.
    runtime.llm.retry.backoff_base = 0.0
    llm_server.script(Fail(503), Fail(503))
    unanswered = chat_request(lilith.id, "Are you there?")
    failed = await answer(runtime, unanswered)
    assert not failed.reply.ok
    with pytest.raises(UserFacingError, match=GONE):
        await runtime.chat.request_again(
            conversation_id=failed.reply.prepared.conversation_id,
            message_id=unanswered.message_id,
            user_id=ALICE,
        )


async def test_a_newer_reply_while_the_model_wrote_keeps_the_old_answer(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "First answer."
    first = chat_request(lilith.id, "Hello there.")
    turn = await answer(runtime, first, "w1")
    conversation_id = turn.reply.prepared.conversation_id
    release = asyncio.Event()
    llm_server.responder = lambda body: "Second answer."
    req = await runtime.chat.request_again(
        conversation_id=conversation_id, message_id=first.message_id, user_id=ALICE
    )
    delivery = ReplyRecorder("w1", release=release)
    running = asyncio.create_task(runtime.chat.answer(req, delivery))
    await delivery.wrote.wait()
    llm_server.responder = lambda body: "Newer answer."
    await answer(runtime, chat_request(lilith.id, "And another thing."), "w2")
    release.set()
    with pytest.raises(UserFacingError, match=NOT_LATEST):
        await running
    assert delivery.reply is None  # nothing was put in place
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("w1", "First answer."), ("w2", "Newer answer.")]


async def test_one_regeneration_at_a_time(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    first = chat_request(lilith.id, "Hello there.")
    turn = await answer(runtime, first, "b1")
    conversation_id = turn.reply.prepared.conversation_id
    release = asyncio.Event()
    req = await runtime.chat.request_again(
        conversation_id=conversation_id, message_id=first.message_id, user_id=ALICE
    )
    delivery = ReplyRecorder("b1", release=release)
    running = asyncio.create_task(runtime.chat.answer(req, delivery))
    await delivery.wrote.wait()
    with pytest.raises(UserFacingError, match=BUSY):
        await answer_again(runtime, conversation_id, first.message_id, "b1")
    release.set()
    assert (await running).reply.ok
