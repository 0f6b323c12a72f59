"""The keyword text of memories formed together from a shared channel: each is keyed by the line said
before it in its own user's thread, never by another user's words, even when one batch holds several
users' exchanges (the previous-line lookup is correlated to each memory, not to the batch).
Real PostgreSQL, Qdrant Edge, the local embedder, the chat model over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from memory.chat.service import ChatRequest
from memory.recall.store import logged_keyword_texts
from models import Memory, Personality
from testkit.llm_server import LLMTestServer

GUILD, CHANNEL = "7", "56"
REPLIES = {
    "kiwi": "Alice, kiwis ripen in paper bags.",
    "mango": "Bob, mangoes like the sun.",
    "orchard": "Alice, a walled orchard suits you.",
    "market": "Bob, the Saturday market opens early.",
}


@pytest.fixture
async def lilith(runtime: Any) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith")
    await runtime.bindings.bind(
        personality_id=personality.id, channel_id=CHANNEL, guild_id=GUILD, user_id="1"
    )
    return personality


async def say(
    runtime: Any, personality: Personality, user: tuple[str, str], message_id: str, text: str
) -> None:
    """One message and its reply, stored as the chat stores them; formation is left for later."""
    user_id, name = user
    prepared = await runtime.chat.prepare(
        ChatRequest(
            personality_id=personality.id,
            user_id=user_id,
            user_name=name,
            guild_id=GUILD,
            channel_id=CHANNEL,
            message_id=message_id,
            text=text,
        )
    )
    reply = await runtime.chat.generate(prepared)
    await runtime.chat.record_reply(reply, [(f"r{message_id}", reply.text)])


async def test_memories_of_two_users_formed_in_one_batch_are_keyed_by_their_own_threads(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    def respond(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        return next(reply for word, reply in REPLIES.items() if isinstance(last, str) and word in last)

    llm_server.responder = respond
    alice, bob = ("A", "Alice"), ("B", "Bob")
    await say(runtime, lilith, alice, "1", "Tell me about kiwi fruit")
    await say(runtime, lilith, bob, "2", "Tell me about mango trees")
    await say(runtime, lilith, alice, "3", "Would an orchard work here?")
    await say(runtime, lilith, bob, "4", "Where is the market?")

    report = await runtime.memory.form_pending(personality_id=lilith.id)
    assert report.memories == 4  # one pass: every exchange of both users in one batch
    async with runtime.sessionmaker() as session:
        formed = (await session.scalars(select(Memory).order_by(Memory.occurred_at, Memory.user_id))).all()
        keyed = await logged_keyword_texts(session, [m.id for m in formed])
    by_first_message = {m.source_message_ids[0]: keyed[m.id] for m in formed}

    # Alice's second memory follows the reply to her first message, not Bob's exchange just before.
    assert REPLIES["kiwi"] in by_first_message["3"]
    assert "mango" not in by_first_message["3"].lower()
    # Bob's second memory follows the reply to his first message, not Alice's second exchange
    # (the line said just before it in the channel) nor her first.
    assert REPLIES["mango"] in by_first_message["4"]
    assert "orchard" not in by_first_message["4"].lower()
    assert "kiwi" not in by_first_message["4"].lower()
    # The first memory of each has no earlier line of its own user: Bob's is not keyed by Alice's.
    assert "kiwi" not in by_first_message["2"].lower()
