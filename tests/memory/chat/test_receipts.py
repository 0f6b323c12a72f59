"""A chat turn keeps which memories its prompt held (the reply's receipt): those in the prompt and no
other, replaced by a regenerated answer's, none in fresh mode. Real PostgreSQL, Qdrant Edge, the
embedder, and the chat LLM over HTTP."""

from __future__ import annotations

import pytest

from bot.runtime import Runtime
from memory.chat.prompt import MEMORY_HEADER
from models import Personality
from testkit.chat import chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer, chat_requests
from tests.memory.chat.windows import use_small_window

SAID = (
    "My dog is called Biscuit and she loves the beach.",
    "My dog Biscuit is scared of thunderstorms.",
    "I am moving to Lisbon in March for a new job.",
)


async def tell(runtime: Runtime, lilith: Personality, llm_server: LLMTestServer) -> None:
    """Told in another channel: memories of messages the history shows are not recalled."""
    llm_server.responder = lambda body: "Noted, thank you."
    for text in SAID:
        await answer(runtime, chat_request(lilith.id, text, channel_id="599"))


def system_prompt(llm_server: LLMTestServer) -> str:
    content: str = chat_requests(llm_server)[-1]["messages"][0]["content"]
    return content


async def test_the_receipt_holds_exactly_the_memories_in_the_prompt(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    await tell(runtime, lilith, llm_server)
    req = chat_request(lilith.id, "What is my dog Biscuit called and what scares her?")
    turn = await answer(runtime, req)
    used = turn.reply.prepared.memories
    assert used and turn.reply.prepared.memories_seen >= len(used)
    receipt = await runtime.memory.reply_receipt(user_id="1001", message_id=req.message_id)
    shown = [m.id for m in receipt.memories]
    recalled = {m.id for m in used}
    assert [i for i in shown if i in recalled] == [m.id for m in used]  # in the prompt's order
    assert len(shown) == turn.reply.prepared.memories_seen
    prompt = system_prompt(llm_server)
    for memory in receipt.memories:
        assert " ".join(memory.content.split()) in prompt
    # By the reply's id too (a Discord message part), and never for someone else.
    by_reply = await runtime.memory.reply_receipt(user_id="1001", message_id=f"{req.message_id}:reply")
    assert [m.id for m in by_reply.memories] == shown


async def test_memories_left_out_for_the_budget_are_not_on_the_receipt(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await tell(runtime, lilith, llm_server)
    await use_small_window(runtime, lilith, llm_server, monkeypatch, window=700)
    runtime.chat.memory_context_share = 0.2  # room for one memory with its context
    req = chat_request(lilith.id, "What is my dog Biscuit called and what scares her, and where am I moving?")
    turn = await answer(runtime, req)
    prepared = turn.reply.prepared
    assert prepared.context is not None and prepared.context.memories_used == len(prepared.memories)
    receipt = await runtime.memory.reply_receipt(user_id="1001", message_id=req.message_id)
    prompt = system_prompt(llm_server)
    assert receipt.memories and len(receipt.memories) == prepared.memories_seen
    missing = [t for t in SAID if t not in prompt]
    assert missing  # the budget left some out: the receipt shows none of them
    assert all(t not in m.content for m in receipt.memories for t in missing)


async def test_fresh_mode_uses_no_memories_and_keeps_no_receipt(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    await tell(runtime, lilith, llm_server)
    await runtime.user_settings.set_fresh("1001", True)
    req = chat_request(lilith.id, "What is my dog Biscuit called?")
    turn = await answer(runtime, req)
    assert turn.reply.prepared.memories == [] and turn.reply.prepared.memories_seen == 0
    assert MEMORY_HEADER.format(user="Alice") not in system_prompt(llm_server)
    receipt = await runtime.memory.reply_receipt(user_id="1001", message_id=req.message_id)
    assert receipt.memories == []
    # Memories still form in fresh mode: this exchange's too.
    assert turn.after is not None and turn.after.remembered_message_ids == [req.message_id]
