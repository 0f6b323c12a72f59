"""Reinforcement across conversations (issue 31): the same line said again after `chat --new` (a new
conversation of the same venue) reinforces its memory instead of adding a row; said in another venue
(a guild channel against the DM) it is a row of its own, marked as the repeat it is. Through the chat
service; real PostgreSQL, Qdrant Edge, the embedder and the chat LLM over HTTP."""

from __future__ import annotations

from sqlalchemy import select

from bot.runtime import Runtime
from models import Memory, Personality
from testkit.chat import chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer

SAID = "My dog Biscuit is a three year old beagle who loves the beach."
DM_CHANNEL = "dm-1"


async def rows(runtime: Runtime) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


async def test_the_same_line_after_a_new_conversation_reinforces_its_memory(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, thank you."
    await answer(runtime, chat_request(lilith.id, SAID, guild_id=None, channel_id=DM_CHANNEL))
    [first] = await rows(runtime)
    await runtime.chat.start_new_conversation(
        personality_id=lilith.id, guild_id=None, channel_id=DM_CHANNEL, user_id="1001"
    )
    await answer(runtime, chat_request(lilith.id, SAID, guild_id=None, channel_id=DM_CHANNEL))
    [again] = await rows(runtime)
    assert again.id == first.id and again.times_said == 2 and again.conversation_id == first.conversation_id

    # In a guild channel (other recalls see it): a row of its own, a repeat of the first.
    await answer(runtime, chat_request(lilith.id, SAID))
    memories = await rows(runtime)
    assert len(memories) == 2 and memories[1].repeat_of == first.id
