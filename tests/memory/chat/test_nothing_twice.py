"""Nothing twice (issue 31): a memory formed from messages the prompt's history still shows is not
recalled into the same prompt, nor counted on the reply's receipt; asked elsewhere, it is. Real
PostgreSQL, Qdrant Edge, the embedder, and the chat LLM over HTTP."""

from __future__ import annotations

from bot.runtime import Runtime
from memory.chat.prompt import MEMORY_HEADER
from models import Personality
from testkit.chat import chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer, chat_requests

SAID = ("My dog is called Biscuit and she loves the beach.", "My dog Biscuit is scared of thunderstorms.")
# Each memory holds a word of the question the other lacks: neither is a near-duplicate of the other.
QUESTION = "Where does my dog Biscuit love to go and what scares her?"


async def test_memories_of_the_history_shown_are_not_recalled_again(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, thank you."
    for text in SAID:
        await answer(runtime, chat_request(lilith.id, text))
    found = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query=QUESTION)
    assert len(found) >= 2  # both are memories, and match the question

    here = chat_request(lilith.id, QUESTION)
    turn = await answer(runtime, here)
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    assert MEMORY_HEADER.format(user="Alice") not in system
    assert turn.reply.prepared.memories == [] and turn.reply.prepared.memories_seen == 0
    receipt = await runtime.memory.reply_receipt(user_id="1001", message_id=here.message_id)
    assert receipt.memories == []

    # In another conversation (another channel), whose history shows none of it: recalled.
    elsewhere = chat_request(lilith.id, QUESTION, channel_id="601")
    turn = await answer(runtime, elsewhere)
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    assert all(text in system for text in SAID) and turn.reply.prepared.memories_seen >= 2


async def test_a_memory_its_user_corrected_is_recalled_though_its_messages_are_shown(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """The history still shows the words the correction overrides: only the memory says what is right."""
    llm_server.responder = lambda body: "Noted, thank you."
    await answer(runtime, chat_request(lilith.id, "My favourite flower is the gardenia."))
    [memory] = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query="favourite flower")
    await runtime.memory.correct(
        user_id="1001", memory_id=memory.id, content="Alice's favourite flower is the moonlily."
    )

    turn = await answer(runtime, chat_request(lilith.id, "Which flower do I like best?"))
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    assert "moonlily" in system and "gardenia" not in system
    assert [m.id for m in turn.reply.prepared.memories] == [memory.id]
