"""A correction retires every memory of the wrong claim (issue 31): the Thistle -> Bramble case built
from a chat, through the chat service and the correction users make (`memory correct`, "Wrong…").
The memories that still say Thistle, in the user's words or the personality's, are superseded, kept
and marked; the next answer's prompt holds Bramble, dated, and never Thistle; the personality saying
Thistle again brings nothing back; the user saying it again later is remembered, as their newest word.
Real PostgreSQL, Qdrant Edge, the embedder, and the chat LLM over HTTP."""

from __future__ import annotations

from sqlalchemy import select

from bot.runtime import Runtime
from memory.chat.prompt import MEMORY_HEADER
from memory.recall.keywords import spoken_date
from models import ForgottenClaim, Memory, Personality
from testkit.chat import ReplyRecorder, chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import chat_requests

HORSE = "My horse is called Thistle and he is a grey cob."
RIBBON = "We won a blue ribbon at the county show on Saturday."
ASKED = "How is my horse doing?"
REPLY_THISTLE = "Thistle must be delighted after that ribbon!"
QUESTION = "What is my horse called?"


async def turn(
    runtime: Runtime, lilith: Personality, text: str, channel_id: str = "600"
) -> tuple[str, ReplyRecorder]:
    """One chat turn (formed after the reply); the message's id and what was told of it."""
    req = chat_request(lilith.id, text, channel_id=channel_id)
    recorder = ReplyRecorder()
    await runtime.chat.answer(req, recorder)
    return req.message_id, recorder


async def memories(runtime: Runtime) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


def memory_section(llm_server: LLMTestServer) -> str:
    system: str = chat_requests(llm_server)[-1]["messages"][0]["content"]
    header = MEMORY_HEADER.format(user="Alice")
    assert header in system
    return system.split(header, 1)[1]


async def test_a_correction_supersedes_every_memory_of_the_wrong_name(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, thank you."
    await turn(runtime, lilith, HORSE)
    await turn(runtime, lilith, "Thistle loves apples more than carrots.")
    await turn(runtime, lilith, RIBBON)
    llm_server.responder = lambda body: REPLY_THISTLE
    await turn(runtime, lilith, ASKED)
    llm_server.responder = lambda body: "Noted, thank you."
    await turn(runtime, lilith, "I take the bus to work every morning.")
    formed = await memories(runtime)
    [named] = [m for m in formed if "called Thistle" in m.content]
    with_thistle = [m for m in formed if "Thistle" in m.content and m.id != named.id]
    assert len(with_thistle) == 2  # the apples, and the personality's own reply

    await runtime.memory.correct(user_id="1001", memory_id=named.id, content="My horse is called Bramble.")

    after = {m.id: m for m in await memories(runtime)}
    async with runtime.sessionmaker() as session:
        [claim] = (await session.scalars(select(ForgottenClaim))).all()
    assert claim.corrected_text == "My horse is called Bramble."
    assert claim.facts["wrong"]["words"] == ["thistle"]
    for m in with_thistle:  # kept, marked with the date and the correction that superseded them
        assert after[m.id].forgotten_claim_id == claim.id and after[m.id].superseded_at is not None
        assert after[m.id].state != "deleted" and "Thistle" in after[m.id].content
    untouched = [m for m in after.values() if "Thistle" not in m.content]
    assert untouched and all(m.superseded_at is None for m in untouched)

    # Asked in another channel (a new conversation, nothing of the old one in its history).
    llm_server.responder = lambda body: "Bramble, of course."
    await turn(runtime, lilith, QUESTION, channel_id="601")
    recalled = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query=QUESTION)
    assert "Bramble" in recalled[0].content
    assert all("Thistle" not in m.text_with_context for m in recalled)
    shown = memory_section(llm_server)
    assert "Thistle" not in shown
    # Why Bramble: the correction is there, dated, under a header saying the newer one holds.
    assert f"[{spoken_date(after[named.id].occurred_at)}] My horse is called Bramble." in shown


async def test_the_personality_saying_it_again_is_superseded_the_user_saying_it_is_remembered(
    runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, thank you."
    await turn(runtime, lilith, HORSE)
    [named] = await memories(runtime)
    await runtime.memory.correct(user_id="1001", memory_id=named.id, content="My horse is called Bramble.")

    # The personality says Thistle: that memory is formed superseded, and is not remembered for Alice.
    llm_server.responder = lambda body: REPLY_THISTLE
    asked, told = await turn(runtime, lilith, ASKED)
    [from_reply] = [m for m in await memories(runtime) if asked in m.source_message_ids]
    assert from_reply.superseded_at is not None and asked not in told.remembered_ids
    recalled = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query="Thistle ribbon")
    assert all("Thistle" not in m.text_with_context for m in recalled)

    # Alice says it again, later: her newest word, remembered (📝) and recalled.
    llm_server.responder = lambda body: "Noted, thank you."
    again, told = await turn(runtime, lilith, "I renamed my horse, he is called Thistle again now.")
    [restated] = [m for m in await memories(runtime) if again in m.source_message_ids]
    assert restated.superseded_at is None and again in told.remembered_ids
    recalled = await runtime.memory.recall(personality_id=lilith.id, user_id="1001", query=QUESTION)
    assert restated.id in {m.id for m in recalled}
    # What the correction superseded stays superseded.
    assert next(m for m in await memories(runtime) if m.id == from_reply.id).superseded_at is not None
