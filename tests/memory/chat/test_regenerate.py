"""Regenerating a reply through the chat service: the same message answered again, the reply's rows
replaced (never a second reply), the memory and the rolling summary holding only the answer that stays.
Real PostgreSQL, Qdrant Edge, embedder, and the chat and summarizer LLMs over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from memory.chat.regenerate import BUSY, GONE, NOT_LATEST, NOT_YOURS
from memory.chat.service import ChatReply
from memory.errors import UserFacingError
from models import Personality, Summary
from testkit.llm_server import LLMTestServer
from tests.memory.chat.memories import remembered
from tests.memory.chat.turns import request, stored

ALICE = "1001"


def sent_as(*ids: str) -> Any:
    """A stand-in for Discord's side: the new answer goes out as these message ids, one part each
    (split at blank lines)."""

    async def put_in_place(reply: ChatReply, old_ids: Sequence[str]) -> list[tuple[str, str]]:
        parts = reply.text.split("\n\n")
        assert len(parts) == len(ids)
        return list(zip(ids, parts, strict=True))

    return put_in_place


async def test_rows_are_replaced_and_the_exchange_remembered_from_the_new_answer(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Part one about owls.\n\nPart two about owls."
    first = request(lilith, "Tell me about the owls in the tower.")
    reply = await runtime.chat.generate(await runtime.chat.prepare(first))
    await runtime.chat.record_reply(reply, [("p1", "Part one about owls."), ("p2", "Part two about owls.")])
    conversation_id = reply.prepared.conversation_id
    await runtime.chat.after_reply(conversation_id)
    [old] = await remembered(runtime.user_settings, ALICE)
    assert "owls" in old["content"]

    # Fewer parts: the first row keeps its id with the new text, the second goes.
    llm_server.responder = lambda body: "Only ravens live in the tower."
    again = await runtime.chat.regenerate.regenerate(
        conversation_id=conversation_id,
        message_id=first.message_id,
        user_id=ALICE,
        put_in_place=sent_as("p1"),
    )
    assert again.ok and again.text == "Only ravens live in the tower."
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("p1", "Only ravens live in the tower.")]
    assert await remembered(runtime.user_settings, ALICE) == []  # the old answer's memory is gone
    await runtime.chat.after_reply(conversation_id)
    [new] = await remembered(runtime.user_settings, ALICE)
    assert (
        "ravens" in new["content"]
        and "owls in the tower" in new["content"]
        and "Part one" not in new["content"]
    )

    # More parts: the new ones answer the same message (their link is what memories follow).
    llm_server.responder = lambda body: "Ravens, first.\n\nRavens, second."
    await runtime.chat.regenerate.regenerate(
        conversation_id=conversation_id,
        message_id=first.message_id,
        user_id=ALICE,
        put_in_place=sent_as("p1", "p3"),
    )
    rows = await stored(runtime, conversation_id, role="assistant")
    assert [(r.external_id, r.content) for r in rows] == [("p1", "Ravens, first."), ("p3", "Ravens, second.")]
    assert rows[0].reply_to_id is not None and rows[1].reply_to_id == rows[0].reply_to_id
    await runtime.chat.after_reply(conversation_id)
    [latest] = await remembered(runtime.user_settings, ALICE)
    assert latest["source_message_ids"] == [first.message_id, "p1", "p3"]
    assert "Ravens, second." in latest["content"] and "Only ravens" not in latest["content"]


async def test_the_rolling_summary_only_holds_the_answer_that_stays(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    runtime.chat._rolling.threshold_tokens = 1
    runtime.chat._rolling.min_messages = 2
    llm_server.responder = lambda body: (
        "A title" if body["model"] == "test-summarizer" else "The map room opens at nine."
    )
    first = request(lilith, "When does the map room open?")
    reply = await runtime.chat.reply(first, reply_id="r1")
    conversation_id = reply.prepared.conversation_id
    report = await runtime.chat.after_reply(conversation_id)
    assert report.summary is None  # the latest reply can still change: it waits for the next update
    llm_server.responder = lambda body: (
        "A title" if body["model"] == "test-summarizer" else "The map room opens at ten."
    )
    await runtime.chat.regenerate.regenerate(
        conversation_id=conversation_id,
        message_id=first.message_id,
        user_id=ALICE,
        put_in_place=sent_as("r1"),
    )
    await runtime.chat.reply(request(lilith, "And the archive?"), reply_id="r2")
    report = await runtime.chat.after_reply(conversation_id)
    assert report.summary is not None and report.summary.message_count == 2
    summarized = [r for r in llm_server.requests if r["model"] == "test-summarizer"]
    transcripts = " ".join(str(m["content"]) for r in summarized for m in r["messages"])
    assert "opens at ten" in transcripts and "opens at nine" not in transcripts
    # The reply it now holds can no longer be regenerated.
    with pytest.raises(UserFacingError, match=NOT_LATEST):
        await runtime.chat.regenerate.check(
            conversation_id=conversation_id, message_id=first.message_id, user_id=ALICE
        )


async def test_a_reply_already_in_a_summary_is_refused(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """A summary made before replies were held back from it (an older deployment) is respected."""
    first = request(lilith, "Hello there.")
    reply = await runtime.chat.reply(first, reply_id="s1")
    conversation_id = reply.prepared.conversation_id
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
        await runtime.chat.regenerate.regenerate(
            conversation_id=conversation_id,
            message_id=first.message_id,
            user_id=ALICE,
            put_in_place=sent_as("s1"),
        )
    assert len(llm_server.requests) == asked


async def test_refusals_name_the_reason(runtime: Any, lilith: Personality) -> None:
    first = request(lilith, "Hello there.")
    reply = await runtime.chat.reply(first, reply_id="n1")
    where = {"conversation_id": reply.prepared.conversation_id, "message_id": first.message_id}
    with pytest.raises(UserFacingError, match=NOT_YOURS):
        await runtime.chat.regenerate.check(**where, user_id="someone-else")
    with pytest.raises(UserFacingError, match=GONE):
        await runtime.chat.regenerate.check(**(where | {"message_id": "never-said"}), user_id=ALICE)
    # A message that got no reply (the model failed, say) has nothing to regenerate.
    unanswered = request(lilith, "Are you there?")
    prepared = await runtime.chat.prepare(unanswered)
    with pytest.raises(UserFacingError, match=GONE):
        await runtime.chat.regenerate.check(
            conversation_id=prepared.conversation_id, message_id=unanswered.message_id, user_id=ALICE
        )


async def test_one_regeneration_at_a_time(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    first = request(lilith, "Hello there.")
    reply = await runtime.chat.reply(first, reply_id="b1")
    where = {
        "conversation_id": reply.prepared.conversation_id,
        "message_id": first.message_id,
        "user_id": ALICE,
    }
    placing = asyncio.Event()
    release = asyncio.Event()

    async def slow(reply: ChatReply, old_ids: Sequence[str]) -> list[tuple[str, str]]:
        placing.set()
        await release.wait()
        return [("b1", reply.text)]

    running = asyncio.create_task(runtime.chat.regenerate.regenerate(**where, put_in_place=slow))
    await placing.wait()
    with pytest.raises(UserFacingError, match=BUSY):
        await runtime.chat.regenerate.regenerate(**where, put_in_place=sent_as("b1"))
    release.set()
    assert (await running).ok
