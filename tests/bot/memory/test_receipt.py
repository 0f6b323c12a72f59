"""The 🧠 receipt beside 🔄 on a reply that used long-term memories, pressed on the fake Discord: the
shipped bot, the real services, PostgreSQL, Qdrant Edge and the chat LLM over HTTP behind it."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select

from bot.runtime import Runtime
from memory.recall.receipts import NOT_YOURS
from models import Memory, Personality
from testkit.fake_discord import CHANNEL, GUILD, FakeDiscord, Invocation, SentMessage
from testkit.llm_server import LLMTestServer
from tests.bot.memory.pages import shown_ids
from tests.bot.seeding import seed_memories
from tests.bot.state import StartBot
from tests.memory.chat.turns import chat_requests

ALICE = 201
BOB = 202
FACTS = (
    ("My dog is called Biscuit and she loves the beach.", "Biscuit sounds like a happy dog!"),
    ("I am moving to Lisbon in March for a new job.", "Lisbon in March, how exciting."),
    ("My favourite book is The Left Hand of Darkness.", "A wonderful choice, Le Guin is great."),
    ("My sister Ines teaches chemistry in Porto.", "Chemistry in Porto, she must be busy."),
)


async def seed(runtime: Runtime, personality: Personality, user: int = ALICE) -> None:
    """Alice's memories with the personality, formed in another channel of this guild (the history of
    this one would show them: they would not be recalled into its prompts)."""
    assert await seed_memories(
        runtime, personality, str(user), exchanges=FACTS, guild_id=str(GUILD), channel_id=str(CHANNEL + 1)
    ) == len(FACTS)


async def live(runtime: Runtime, user: int = ALICE) -> dict[str, Memory]:
    async with runtime.sessionmaker() as session:
        rows = await session.scalars(
            select(Memory).where(Memory.user_id == str(user), Memory.state != "deleted")
        )
        return {str(m.id): m for m in rows.all()}


def brain(message: SentMessage) -> dict[str, Any] | None:
    return next((b for b in message.buttons if b["emoji"]["name"] == "🧠"), None)


def in_prompt(llm_server: LLMTestServer, memories: dict[str, Memory]) -> set[str]:
    """The ids of these memories whose words the last chat prompt held."""
    system = chat_requests(llm_server)[-1]["messages"][0]["content"]
    return {i for i, m in memories.items() if " ".join(m.content.split()) in system}


async def open_receipt(fake_discord: FakeDiscord, reply: SentMessage, user: int = ALICE) -> Invocation:
    button = brain(reply)
    assert button is not None
    return await fake_discord.click(reply, index=reply.buttons.index(button), user=user)


async def test_a_reply_that_used_memories_shows_exactly_them_to_the_user_answered(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seed(runtime, lilith)
    llm_server.responder = lambda body: "Biscuit, on the beach, of course."
    await fake_discord.say("Lilith, what is my dog called and where does she like to go?", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    memories = await live(runtime)
    used = in_prompt(llm_server, memories)
    assert used and len(used) < len(memories)  # some, not all: the receipt names which
    button = brain(reply)
    assert button is not None and button["label"] == str(len(used))
    assert [b["emoji"]["name"] for b in reply.buttons] == ["🔄", "🧠"]

    page = (await open_receipt(fake_discord, reply)).reply
    assert page.ephemeral
    assert set(shown_ids(page)) == used
    first = shown_ids(page)[0]
    assert "Biscuit" in memories[first].content and "match #1" in page.content

    # Anyone else is refused, privately, and sees none of it.
    refused = await open_receipt(fake_discord, reply, user=BOB)
    assert refused.reply.ephemeral and refused.text == NOT_YOURS
    assert "Biscuit" not in refused.text


async def test_pin_wrong_and_forget_work_from_the_receipt(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seed(runtime, lilith)
    llm_server.responder = lambda body: "Biscuit, of course."
    await fake_discord.say("Lilith, what is my dog called?", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    page = (await open_receipt(fake_discord, reply)).reply
    memories = await live(runtime)
    dog = next(i for i in shown_ids(page) if "Biscuit" in memories[i].content)

    await fake_discord.choose(page, [dog], user=ALICE)
    await fake_discord.click(page, "Pin", user=ALICE)
    assert (await live(runtime))[dog].pinned and "📌 pinned" in page.content

    opened = await fake_discord.click(page, "Wrong…", user=ALICE)
    corrected = "My dog is called Biscuit and she loves the lake, not the beach."
    await fake_discord.submit_modal(
        opened.modal, {"personae:browse:correction": corrected}, user=ALICE, message=page
    )
    assert (await live(runtime))[dog].content == corrected

    await fake_discord.click(page, "Forget", user=ALICE)
    await fake_discord.click(page, "Forget it", user=ALICE)
    assert dog not in await live(runtime)
    assert dog not in shown_ids(page)
    # The receipt opened again leaves the forgotten memory out, and says so.
    again = (await open_receipt(fake_discord, reply)).reply
    assert dog not in shown_ids(again) or not shown_ids(again)
    assert "forgotten since" in again.content


async def test_the_receipt_works_after_a_restart_and_follows_a_regenerated_answer(
    fake_discord: FakeDiscord,
    start_bot: StartBot,
    lilith: Personality,
    runtime: Runtime,
    llm_server: LLMTestServer,
) -> None:
    await seed(runtime, lilith)
    llm_server.responder = lambda body: "Biscuit!"
    await fake_discord.say("Lilith, what is my dog called, and where am I moving?", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    before = set(shown_ids((await open_receipt(fake_discord, reply)).reply))
    assert before

    # A new bot process: nothing of the old one in memory; the button on Discord's message still works.
    await fake_discord.stop()
    await start_bot()
    assert set(shown_ids((await open_receipt(fake_discord, reply)).reply)) == before

    # 🔄: the new answer's own memories (one forgotten meanwhile is not recalled into it).
    memories = await live(runtime)
    dog = next(i for i in before if "Biscuit" in memories[i].content)
    await runtime.memory.forget(user_id=str(ALICE), memory_ids=[uuid.UUID(dog)])
    llm_server.responder = lambda body: "I don't recall your dog's name."
    await fake_discord.click(reply, index=0, user=ALICE)
    assert reply.content == "I don't recall your dog's name."
    now = in_prompt(llm_server, await live(runtime))
    assert now == before - {dog}
    button = brain(reply)
    assert button is not None and button["label"] == str(len(now))
    assert set(shown_ids((await open_receipt(fake_discord, reply)).reply)) == now


async def test_no_memories_no_button_and_fresh_mode_uses_none(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Hello there."
    await fake_discord.say("Lilith, hello", user=BOB)  # Bob has no memories
    [hello] = fake_discord.sent_by_bot(CHANNEL)
    assert [b["emoji"]["name"] for b in hello.buttons] == ["🔄"]

    await seed(runtime, lilith)
    done = await fake_discord.command("memory fresh", state="on", user=ALICE, guild=GUILD)
    assert done.reply.ephemeral and done.text.startswith("Fresh mode is on with every personality")
    status = await fake_discord.command("memory status", user=ALICE, guild=GUILD)
    assert "Fresh mode: on" in status.text
    await fake_discord.say("Lilith, what is my dog called?", user=ALICE)
    reply = fake_discord.sent_by_bot(CHANNEL)[-1]
    assert brain(reply) is None and not in_prompt(llm_server, await live(runtime))
    assert len(await live(runtime)) > len(FACTS)  # memories still form

    await fake_discord.command("memory fresh", state="off", user=ALICE, guild=GUILD)
    assert "Fresh mode: off" in (await fake_discord.command("memory status", user=ALICE, guild=GUILD)).text
    await fake_discord.say("Lilith, what is my dog called?", user=ALICE)
    assert brain(fake_discord.sent_by_bot(CHANNEL)[-1]) is not None
