"""Several users talking to one personality in one channel through the ChatService, replies finishing
in any order: every memory holds one user's messages and the replies to them, nothing is lost or
remembered twice. Real PostgreSQL, Qdrant Edge, the local embedder, the chat model over HTTP."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import BigInteger, func, literal, select

from bot.runtime import Runtime
from memory.chat.service import ChatRequest, ChatTurn
from memory.conversations import Venue, ensure_conversation
from memory.formation.forming import CLAIM_LOCK_SPACE
from memory.recall.keyword_texts import logged_keyword_texts
from memory.types import MessageRole
from models import Memory, Message, Personality
from testkit.chat import ReplyRecorder, chat_request
from testkit.llm_server import Fail, LLMTestServer
from tests.memory.chat.turns import answer

GUILD, CHANNEL = "7", "55"
ALICE_MEMORY = "Alice: Lilith, my bank PIN is 4921, remember it\nLilith: Alice, I'll remember your PIN 4921."
BOB_MEMORY = "Bob: Lilith, what's a good book?\nLilith: Bob, try Dune."


def request(personality: Personality, user_id: str, name: str, message_id: str, text: str) -> ChatRequest:
    """A user's message in the shared channel."""
    return chat_request(
        personality.id,
        text,
        user_id=user_id,
        user_name=name,
        guild_id=GUILD,
        channel_id=CHANNEL,
        message_id=message_id,
    )


def last_line(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else ""


@pytest.fixture
async def lilith(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith")
    await runtime.bindings.bind(
        personality_id=personality.id, channel_id=CHANNEL, guild_id=GUILD, user_id="1"
    )
    return personality


async def memories(runtime: Runtime) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


def held(reply_id: str) -> ReplyRecorder:
    """A delivery that holds its turn once the model has written, until its `release` is set."""
    return ReplyRecorder(reply_id, release=asyncio.Event())


async def started(runtime: Runtime, req: ChatRequest, delivery: ReplyRecorder) -> asyncio.Task[ChatTurn]:
    """The turn running, its message stored and its reply written (held, if the delivery holds it)."""
    turn = asyncio.create_task(runtime.chat.answer(req, delivery))
    await delivery.wrote.wait()
    return turn


async def finished(turn: asyncio.Task[ChatTurn], delivery: ReplyRecorder) -> ChatTurn:
    """Let a held turn deliver its reply, record it and form memories; what it did."""
    assert delivery.release is not None
    delivery.release.set()
    return await turn


async def test_two_users_with_alices_reply_first_remember_like_the_transcript(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: (
        "Alice, I'll remember your PIN 4921." if "PIN" in last_line(body) else "Bob, try Dune."
    )
    alice_asks = request(lilith, "A", "Alice", "1", "Lilith, my bank PIN is 4921, remember it")
    bob_asks = request(lilith, "B", "Bob", "2", "Lilith, what's a good book?")
    to_alice, to_bob = held("3"), held("4")
    alice = await started(runtime, alice_asks, to_alice)
    bob = await started(runtime, bob_asks, to_bob)  # stored after Alice's, before any reply
    # Alice's reply finishes first; formation runs after it while Bob still waits for his.
    turn = await finished(alice, to_alice)
    assert turn.after is not None and turn.after.remembered_message_ids == ["1"]
    assert [m.content for m in await memories(runtime)] == [ALICE_MEMORY]
    assert await runtime.memory.pending_message_count(user_id="B") == 1  # waiting, not taken

    turn = await finished(bob, to_bob)
    assert turn.after is not None and turn.after.remembered_message_ids == ["2"]
    alice_memory, bob_memory = await memories(runtime)
    assert (alice_memory.user_id, alice_memory.content, alice_memory.source_message_ids) == (
        "A",
        ALICE_MEMORY,
        ["1", "3"],
    )
    assert (bob_memory.user_id, bob_memory.content, bob_memory.source_message_ids) == (
        "B",
        BOB_MEMORY,
        ["2", "4"],
    )
    assert await runtime.memory.pending_message_count() == 0


async def test_nul_bytes_and_lone_surrogates_in_chat_are_stored_sanely(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "got it\u0000 \udfff"
    turn = await answer(runtime, request(lilith, "A", "Alice", "1", "a\u0000b \ud800"), "2")
    assert turn.reply.ok
    async with runtime.sessionmaker() as session:
        stored = [m.content for m in (await session.scalars(select(Message).order_by(Message.id))).all()]
    assert stored == ["ab \ufffd", "got it \ufffd"]
    assert [m.content for m in await memories(runtime)] == ["Alice: ab \ufffd\nLilith: got it \ufffd"]


async def check_memories(runtime: Runtime) -> tuple[list[Memory], dict[str, Message]]:
    """Every memory holds only its user's messages and replies to them; each message is in one."""
    async with runtime.sessionmaker() as session:
        rows = {m.external_id: m for m in (await session.scalars(select(Message))).all()}
    by_id = {m.id: m for m in rows.values()}
    formed = await memories(runtime)
    for memory in formed:
        for external_id in memory.source_message_ids:
            message = rows[external_id]
            if message.role == MessageRole.USER.value:
                assert message.author_id == memory.user_id, (memory.content, external_id)
            else:
                assert message.reply_to_id is not None
                assert by_id[message.reply_to_id].author_id == memory.user_id, (memory.content, external_id)
    counts = Counter(i for memory in formed for i in memory.source_message_ids)
    assert set(counts) == set(rows), "every message is remembered"
    assert max(counts.values()) == 1, "no message is remembered twice"
    assert await runtime.memory.pending_message_count() == 0
    return formed, rows


async def test_eight_users_in_turn_each_get_exactly_their_exchanges(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """8 users × 6 messages into one channel, each user waiting for their reply before saying more;
    the replies of different users finish in random order, each followed by its formation pass."""
    rng = random.Random(9)
    llm_server.responder = lambda body: f"re: {last_line(body).split(': ', 1)[-1]}"
    loop = asyncio.get_running_loop()

    async def talk(user: int) -> None:
        for n in range(6):
            req = request(lilith, f"u{user}", f"User{user}", f"{user}-{n}", f"user {user} says {n}")
            delivery = held(f"{user}-{n}-r")
            turn = await started(runtime, req, delivery)
            assert delivery.release is not None
            loop.call_later(rng.uniform(0, 0.02), delivery.release.set)
            await turn

    await asyncio.gather(*(talk(user) for user in range(8)))
    formed, _ = await check_memories(runtime)
    assert_one_memory_per_message_and_reply(formed, per_user=6)


async def test_eight_users_at_once_with_replies_in_random_order(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """All 80 messages (10 from each user) arrive before any reply, then the replies finish in random
    order, formation running after each: 0 cross-user contents, 0 lost, 0 duplicated, nothing left
    pending."""
    rng = random.Random(11)
    llm_server.responder = lambda body: f"re: {last_line(body).split(': ', 1)[-1]}"
    said = [(user, n) for n in range(10) for user in range(8)]
    rng.shuffle(said)
    turns = []
    for user, n in said:
        req = request(lilith, f"u{user}", f"User{user}", f"{user}-{n}", f"user {user} says {n}")
        delivery = held(f"{user}-{n}-r")
        turns.append((await started(runtime, req, delivery), delivery))
    order = list(turns)
    rng.shuffle(order)

    async def finish(turn: asyncio.Task[ChatTurn], delivery: ReplyRecorder) -> None:
        await asyncio.sleep(rng.uniform(0, 0.05))
        assert (await finished(turn, delivery)).reply.ok

    await asyncio.gather(*(finish(turn, delivery) for turn, delivery in order))
    formed, rows = await check_memories(runtime)
    assert len(rows) == 160
    # Each message waited for its own reply, however many of its author's came first.
    assert_one_memory_per_message_and_reply(formed, per_user=10)


async def test_a_message_being_answered_waits_for_its_own_reply(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: f"re: {last_line(body).split(': ', 1)[-1]}"
    to_first = held("1r")
    first = await started(runtime, request(lilith, "A", "Alice", "1", "my cat is Mochi"), to_first)
    await answer(runtime, request(lilith, "A", "Alice", "2", "my dog is Rex"), "2r")
    assert [m.source_message_ids for m in await memories(runtime)] == [["2", "2r"]]
    assert await runtime.memory.pending_message_count() == 1  # the first one, still being answered
    await finished(first, to_first)
    assert [m.source_message_ids for m in await memories(runtime)] == [["2", "2r"], ["1", "1r"]]


async def test_a_message_that_got_no_reply_joins_its_authors_next_exchange(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    runtime.llm.retry.backoff_base = 0.0
    llm_server.script(Fail(503), Fail(503))
    failed = await answer(runtime, request(lilith, "A", "Alice", "1", "what should I cook tonight?"))
    assert not failed.reply.ok
    await answer(runtime, request(lilith, "B", "Bob", "2", "hello"), "2r")
    assert await runtime.memory.pending_message_count(user_id="A") == 1  # not Bob's, and not lost
    llm_server.responder = lambda body: "A warm soup, and a salad tomorrow."
    await answer(runtime, request(lilith, "A", "Alice", "3", "and tomorrow, a salad?"), "3r")
    by_user = {m.user_id: m.source_message_ids for m in await memories(runtime)}
    assert by_user == {"B": ["2", "2r"], "A": ["1", "3", "3r"]}
    assert await runtime.memory.pending_message_count() == 0


async def test_memories_formed_in_one_batch_are_keyed_by_their_own_users_threads(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """Alice and Bob take turns; one formation pass then forms all four exchanges in one batch. Each
    memory's keyword text holds the line said before it in its own user's thread (the reply to their
    previous message), never another user's words: the previous-line lookup is correlated to each
    memory, not to the batch."""
    replies = {
        "kiwi": "Alice, kiwis ripen in paper bags.",
        "mango": "Bob, mangoes like the sun.",
        "orchard": "Alice, a walled orchard suits you.",
        "market": "Bob, the Saturday market opens early.",
    }
    llm_server.responder = lambda body: next(r for word, r in replies.items() if word in last_line(body))
    said = [
        ("A", "Alice", "1", "Tell me about kiwi fruit"),
        ("B", "Bob", "2", "Tell me about mango trees"),
        ("A", "Alice", "3", "Would an orchard work here?"),
        ("B", "Bob", "4", "Where is the market?"),
    ]
    # Another process (a worker) holds the conversation meanwhile: the turns leave their exchanges
    # pending, for one pass to form them together.
    async with runtime.sessionmaker.begin() as session:
        conversation_id = await ensure_conversation(session, lilith.id, Venue(GUILD, CHANNEL, "A"))
    async with runtime.sessionmaker.begin() as worker:
        claim = literal(CLAIM_LOCK_SPACE + conversation_id, BigInteger)
        await worker.execute(select(func.pg_advisory_xact_lock(claim)))
        for user_id, name, message_id, text in said:
            await answer(runtime, request(lilith, user_id, name, message_id, text), f"{message_id}r")

    report = await runtime.memory.form_pending(personality_id=lilith.id)
    assert report.memories == 4
    formed = await memories(runtime)
    async with runtime.sessionmaker() as session:
        keyed = await logged_keyword_texts(session, [m.id for m in formed])
    by_first = {m.source_message_ids[0]: keyed[m.id].text.lower() for m in formed}
    # Alice's second memory follows the reply to her first message, not Bob's exchange just before.
    assert replies["kiwi"].lower() in by_first["3"]
    assert "mango" not in by_first["3"]
    # Bob's second follows the reply to his first, not Alice's second exchange (said just before it
    # in the channel) nor her first; Bob's first has no earlier line of his own.
    assert replies["mango"].lower() in by_first["4"]
    assert "orchard" not in by_first["4"] and "kiwi" not in by_first["4"]
    assert "kiwi" not in by_first["2"]


def assert_one_memory_per_message_and_reply(formed: list[Memory], *, per_user: int) -> None:
    assert sorted(m.source_message_ids for m in formed) == sorted(
        [f"{user}-{n}", f"{user}-{n}-r"] for user in range(8) for n in range(per_user)
    )
    for memory in formed:
        user, n = memory.source_message_ids[0].split("-")
        assert memory.content == f"User{user}: user {user} says {n}\nLilith: re: user {user} says {n}"
