"""Replies linked to what they answer, from the log to the memories: real PostgreSQL, Qdrant Edge, the
local embedder, and the summarizer over HTTP (the `runtime` the bot builds)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, select

from bot.runtime import Runtime
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.errors import InvalidInputError
from memory.types import MessageRole
from models import Memory, Message, Personality
from testkit.imports import import_text
from testkit.llm_server import LLMTestServer

T0 = datetime(2024, 3, 15, 18, 0, tzinfo=UTC)
GUILD = {"channel_id": "55", "guild_id": "7"}
ALICE_ASKS = {
    "id": "1",
    "role": "user",
    "content": "Lilith, my bank PIN is 4921, remember it",
    "user_id": "A",
}
BOB_ASKS = {"id": "2", "role": "user", "content": "Lilith, what's a good book?", "user_id": "B"}
TO_ALICE = {"id": "3", "role": "assistant", "content": "Alice, I'll remember your PIN 4921."}
TO_BOB = {"id": "4", "role": "assistant", "content": "Bob, try Dune."}
ALICE_MEMORY = "Alice: Lilith, my bank PIN is 4921, remember it\nLilith: Alice, I'll remember your PIN 4921."
BOB_MEMORY = "Bob: Lilith, what's a good book?\nLilith: Bob, try Dune."


def two_users(*, linked: bool) -> str:
    """The issue's transcript: Alice and Bob in one channel, the replies in the order they finished."""
    lines = [
        {**ALICE_ASKS, "author": "Alice", **GUILD},
        {**BOB_ASKS, "author": "Bob", **GUILD},
        {**TO_ALICE, **GUILD, **({"reply_to": "1"} if linked else {})},
        {**TO_BOB, **GUILD, **({"reply_to": "2"} if linked else {})},
    ]
    return "\n".join(json.dumps(line) for line in lines)


async def memories_of(runtime: Runtime, user_id: str) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        rows = await session.scalars(
            select(Memory).where(Memory.user_id == user_id).order_by(Memory.occurred_at)
        )
        return list(rows.all())


async def links(runtime: Runtime) -> dict[str, str | None]:
    """Each stored message's external id -> the external id of the message it answers."""
    async with runtime.sessionmaker() as session:
        rows = {m.id: m for m in (await session.scalars(select(Message))).all()}
    return {m.external_id: rows[m.reply_to_id].external_id if m.reply_to_id else None for m in rows.values()}


@pytest.fixture
async def lilith(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith")
    return personality


def said(external_id: str, who: str, text: str, minute: int, reply_to: str | None = None) -> LoggedMessage:
    role = MessageRole.ASSISTANT if who == "lilith" else MessageRole.USER
    return LoggedMessage(
        external_id, who, who.title(), role, text, T0 + timedelta(minutes=minute), reply_to=reply_to
    )


async def store(runtime: Runtime, personality: Personality, *messages: LoggedMessage) -> int:
    async with runtime.sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, personality.id, Venue("7", "55", "A"))
        await store_messages(session, conversation, list(messages))
    return conversation


async def test_two_users_at_once_each_remember_their_own_exchange(
    runtime: Runtime, lilith: Personality
) -> None:
    report = await import_text(runtime, lilith, two_users(linked=True))
    assert report.formation.memories == 2
    [alice] = await memories_of(runtime, "A")
    [bob] = await memories_of(runtime, "B")
    assert alice.content == ALICE_MEMORY and alice.source_message_ids == ["1", "3"]
    assert bob.content == BOB_MEMORY and bob.source_message_ids == ["2", "4"]
    # Bob may be shown his own memory (recall ranks, it has no floor), never Alice's PIN.
    found = await runtime.memory.recall(personality_id=lilith.id, user_id="B", query="PIN", guild_id="7")
    assert all(m.id == bob.id and "4921" not in m.content for m in found)
    assert await runtime.memory.pending_message_count() == 0


async def test_without_reply_to_each_reply_answers_whoever_spoke_last(
    runtime: Runtime, lilith: Personality
) -> None:
    """The default, documented: a transcript that does not say who was answered is read as answering
    the nearest user line before each reply. Both replies then answer Bob, and Alice's line waits for
    a reply of its own (it is not lost, and not remembered as Bob's)."""
    await import_text(runtime, lilith, two_users(linked=False))
    assert await links(runtime) == {"1": None, "2": None, "3": "2", "4": "2"}
    [bob] = await memories_of(runtime, "B")
    assert bob.source_message_ids == ["2", "3", "4"]
    assert await memories_of(runtime, "A") == []
    assert await runtime.memory.pending_message_count(user_id="A") == 1


async def test_a_reply_without_a_channel_is_filed_with_the_message_it_answers(
    runtime: Runtime, lilith: Personality
) -> None:
    text = "\n".join(json.dumps(line) for line in [{**ALICE_ASKS, "author": "Alice", **GUILD}, TO_ALICE])
    report = await import_text(runtime, lilith, text)
    assert report.formation.memories == 1
    [alice] = await memories_of(runtime, "A")
    assert (alice.content, alice.guild_id, alice.channel_id) == (ALICE_MEMORY, "7", "55")
    assert await runtime.memory.pending_message_count() == 0


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"reply_to": "9"}, "line 3: reply_to '9' names no message on an earlier line"),
        ({"reply_to": "4"}, "line 3: reply_to '4' names no message on an earlier line"),
        ({"reply_to": "2"}, "line 3: reply_to '2' is not a user message"),
    ],
)
async def test_a_reply_to_that_names_no_earlier_user_line_is_refused(
    runtime: Runtime, lilith: Personality, reply: dict[str, str], message: str
) -> None:
    lines = [ALICE_ASKS, {**TO_ALICE, "id": "2"}, {**TO_BOB, "id": "3", **reply}, {**BOB_ASKS, "id": "4"}]
    with pytest.raises(InvalidInputError) as info:
        await import_text(runtime, lilith, "\n".join(json.dumps(line) for line in lines))
    assert str(info.value) == message
    assert await links(runtime) == {}  # nothing stored


async def test_a_reply_to_in_another_channel_is_refused(runtime: Runtime, lilith: Personality) -> None:
    text = "\n".join(
        json.dumps(line)
        for line in [{**ALICE_ASKS, **GUILD}, {**TO_ALICE, "channel_id": "56", "reply_to": "1"}]
    )
    with pytest.raises(InvalidInputError) as info:
        await import_text(runtime, lilith, text)
    assert str(info.value) == "line 2: reply_to '1' is a message of another channel"
    assert await runtime.memory.pending_message_count() == 0  # nothing stored


async def test_nul_bytes_and_lone_surrogates_are_stored_sanely(runtime: Runtime, lilith: Personality) -> None:
    text = "\n".join(
        json.dumps(line)
        for line in [
            {
                **ALICE_ASKS,
                "content": "my PIN is 49\u000021 \ud83d and \ud83d\ude00",
                "author": "Al\u0000ice",
            },
            {**TO_ALICE, "content": "noted \udc00 4921"},
        ]
    )
    report = await import_text(runtime, lilith, text)
    assert report.formation.memories == 1
    [alice] = await memories_of(runtime, "A")
    assert alice.content == "Alice: my PIN is 4921 \ufffd and \U0001f600\nLilith: noted \ufffd 4921"


async def test_store_links_each_new_reply(runtime: Runtime, lilith: Personality) -> None:
    await store(runtime, lilith, said("u1", "alice", "hi", 0), said("r1", "lilith", "hello", 1))
    await store(
        runtime,
        lilith,
        said("r0", "lilith", "and welcome", 2),  # nothing before it in this batch: the log's latest
        said("u2", "bob", "yo", 3),
        said("u3", "alice", "again", 4),
        said("r2", "lilith", "yo Bob", 5, reply_to="u2"),
        said("r3", "lilith", "to no one", 6, reply_to="nobody"),
        said("r1", "lilith", "hello, stored again", 7, reply_to="u3"),  # already stored: unchanged
    )
    assert await links(runtime) == {
        "u1": None,
        "r1": "u1",
        "r0": "u1",
        "u2": None,
        "u3": None,
        "r2": "u2",
        "r3": None,
    }


async def test_a_late_reply_is_remembered_once_without_repeating_its_message(
    runtime: Runtime, lilith: Personality
) -> None:
    """Alice's second message was answered first: her first one (no reply yet) joins that exchange;
    its own reply, arriving after, becomes a memory of its own. No message is in two memories."""
    conversation = await store(
        runtime,
        lilith,
        said("u1", "alice", "my cat is Mochi", 0),
        said("u2", "alice", "and my dog is Rex", 1),
        said("r2", "lilith", "Rex, noted", 2, reply_to="u2"),
    )
    await runtime.memory.form_pending(conversation_id=conversation)
    await store(runtime, lilith, said("r1", "lilith", "Mochi, noted", 3, reply_to="u1"))
    await runtime.memory.form_pending(conversation_id=conversation)
    first, late = await memories_of(runtime, "alice")
    assert first.source_message_ids == ["u1", "u2", "r2"]
    assert late.source_message_ids == ["r1"] and late.content == "Lilith: Mochi, noted"
    assert await runtime.memory.pending_message_count() == 0


async def test_a_reply_whose_message_was_deleted_is_marked_done_without_a_memory(
    runtime: Runtime, lilith: Personality
) -> None:
    conversation = await store(
        runtime, lilith, said("u1", "alice", "forget this", 0), said("r1", "lilith", "ok", 1)
    )
    async with runtime.sessionmaker.begin() as session:
        await session.execute(delete(Message).where(Message.external_id == "u1"))
    report = await runtime.memory.form_pending(conversation_id=conversation)
    assert report.memories == 0 and await memories_of(runtime, "alice") == []
    assert await runtime.memory.pending_message_count() == 0


async def test_a_pass_asked_for_while_another_forms_the_conversation_is_not_lost(
    runtime: Runtime, llm_server: LLMTestServer
) -> None:
    """Bob's reply is stored while the pass started by Alice's reply summarizes: the pass after Bob's
    reply is skipped (that conversation is held), and the holder forms Bob's exchange before it ends."""
    sage, _ = await runtime.personalities.create("Sage", memory_mode="summarized")
    story = "my sister Leila moved to Porto on March 15th with the cat Mochi, to Rua das Flores 42. " * 3
    conversation = await store(
        runtime,
        sage,
        said("u1", "alice", story, 0),
        said("u2", "bob", "what's a good book to read on a long train ride to Lisbon next week?", 1),
        said("r1", "lilith", "Porto with Mochi, lovely! Rua das Flores 42, noted.", 2, reply_to="u1"),
    )
    llm_server.responder = lambda body: "Alice's sister Leila moved to Porto on March 15th with Mochi."
    llm_server.latency = 1.5
    alice_pass = asyncio.create_task(runtime.memory.form_pending(conversation_id=conversation))
    while not llm_server.requests:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await store(
        runtime, sage, said("r2", "lilith", "Try Dune, a long book for a long ride.", 3, reply_to="u2")
    )
    bob_pass = await runtime.memory.form_pending(conversation_id=conversation)
    alice_report = await alice_pass
    assert bob_pass.memories == 0
    assert sorted(alice_report.remembered_message_ids) == ["u1", "u2"]
    [bob] = await memories_of(runtime, "bob")
    assert bob.source_message_ids == ["u2", "r2"]
    assert await runtime.memory.pending_message_count() == 0
