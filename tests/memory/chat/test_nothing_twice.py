"""Nothing twice (issue 31): a memory formed from messages the prompt's history still shows is not
recalled into the same prompt, nor counted on the reply's receipt; asked elsewhere, it is. Real
PostgreSQL, Qdrant Edge, the embedder, and the chat LLM over HTTP."""

from __future__ import annotations

from typing import Any

from memory.chat.prompt import MEMORY_HEADER
from models import Personality
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer, chat_requests, request

SAID = ("My dog is called Biscuit and she loves the beach.", "My dog Biscuit is scared of thunderstorms.")
# Each memory holds a word of the question the other lacks: neither is a near-duplicate of the other.
QUESTION = "Where does my dog Biscuit love to go and what scares her?"


async def test_memories_of_the_history_shown_are_not_recalled_again(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, thank you."
    for text in SAID:
        await answer(runtime, request(lilith, text))
    found = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query=QUESTION)
    assert len(found) >= 2  # both are memories, and match the question

    here = request(lilith, QUESTION)
    turn = await answer(runtime, here)
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    assert MEMORY_HEADER.format(user="Alice") not in system
    assert turn.reply.prepared.memories == [] and turn.reply.prepared.memories_seen == 0
    receipt = await runtime.memory.reply_receipt(user_id="1001", message_id=here.message_id)
    assert receipt.memories == []

    # In another conversation (another channel), whose history shows none of it: recalled.
    elsewhere = request(lilith, QUESTION, channel_id="601")
    turn = await answer(runtime, elsewhere)
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    assert all(text in system for text in SAID) and turn.reply.prepared.memories_seen >= 2
