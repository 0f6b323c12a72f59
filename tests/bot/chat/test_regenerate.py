"""The 🔄 button on a personality's latest reply, pressed on the fake Discord: the shipped bot answers
again in place, with the real services, PostgreSQL, Qdrant Edge and the chat LLM over HTTP behind it."""

from __future__ import annotations

from sqlalchemy import select

from bot.runtime import Runtime
from memory.chat.regenerate import NOT_LATEST, NOT_YOURS
from memory.chat.service import UNAVAILABLE_REPLY
from models import Message, Personality
from testkit.fake_discord import CHANNEL, FakeDiscord
from testkit.llm_server import Fail, LLMTestServer
from tests.bot.state import StartBot, bind
from tests.memory.chat.memories import remembered
from tests.memory.chat.turns import chat_requests

ALICE = 201
BOB = 202
PARAGRAPH = "The northern maps were drawn by monks who never saw the sea. " * 20


async def replies(runtime: Runtime) -> list[Message]:
    async with runtime.sessionmaker() as session:
        return list(
            (
                await session.scalars(select(Message).where(Message.role == "assistant").order_by(Message.id))
            ).all()
        )


def answering(llm_server: LLMTestServer, text: str) -> None:
    llm_server.responder = lambda body: text


async def test_regenerate_replaces_the_reply_in_place_and_remembers_only_the_new_answer(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "Mochi is a fine name for a lighthouse keeper's cat.")
    asked = (await fake_discord.say("Lilith, my cat is called Mochi.", user=ALICE)).id
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    assert reply.webhook_id is not None and reply.author["username"] == "Lilith"
    assert [b["emoji"]["name"] for b in reply.buttons] == ["🔄"]
    [old] = await remembered(runtime.transfer, str(ALICE))
    assert "lighthouse keeper" in old["content"]
    first_prompt = chat_requests(llm_server)[-1]["messages"]

    answering(llm_server, "Mochi! Does she sleep on the warm maps too?")
    pressed = await fake_discord.click(reply, user=ALICE)
    # The same message was answered again, with the same prompt (the old answer's memory not in it).
    assert chat_requests(llm_server)[-1]["messages"] == first_prompt
    # In place: the webhook's message edited, its button kept; the "thinking…" note gone.
    assert fake_discord.sent_by_bot(CHANNEL) == [reply]
    assert reply.content == "Mochi! Does she sleep on the warm maps too?"
    assert [b["emoji"]["name"] for b in reply.buttons] == ["🔄"]
    [edit] = fake_discord.edits_of(reply.id)
    assert edit.startswith(f"/webhooks/{reply.webhook_id}/")
    assert pressed.replies == []
    # One reply row, the new text in it; the memory formed from the new answer only.
    [row] = await replies(runtime)
    assert (row.external_id, row.content) == (str(reply.id), reply.content)
    [new] = await remembered(runtime.transfer, str(ALICE))
    assert "warm maps" in new["content"] and "lighthouse keeper" not in new["content"]
    assert new["source_message_ids"] == [str(asked), str(reply.id)]


async def test_only_the_user_answered_may_regenerate(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "Welcome to the library.")
    await fake_discord.say("Lilith, hello", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    asked = len(chat_requests(llm_server))
    refused = await fake_discord.click(reply, user=BOB)
    assert refused.reply.ephemeral and refused.text == NOT_YOURS
    assert reply.content == "Welcome to the library." and reply.edits == 0 and reply.buttons
    assert len(chat_requests(llm_server)) == asked  # the model was not asked again
    assert [r.content for r in await replies(runtime)] == ["Welcome to the library."]


async def test_an_older_reply_cannot_be_regenerated_and_loses_its_button(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "The first answer.")
    await fake_discord.say("Lilith, one", user=ALICE)
    answering(llm_server, "The second answer.")
    await fake_discord.say("Lilith, two", user=ALICE)
    first, second = fake_discord.sent_by_bot(CHANNEL)
    asked = len(chat_requests(llm_server))
    refused = await fake_discord.click(first, user=ALICE)
    assert refused.reply.ephemeral and refused.text == NOT_LATEST
    assert first.content == "The first answer." and first.buttons == []
    assert len(chat_requests(llm_server)) == asked
    # The latest one still can.
    answering(llm_server, "The second answer, again.")
    await fake_discord.click(second, user=ALICE)
    assert [r.content for r in await replies(runtime)] == ["The first answer.", "The second answer, again."]


async def test_in_a_dm_the_bots_own_message_is_edited(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    dm = fake_discord.dm_channel(ALICE)
    await bind(runtime, lilith, dm, dm=True)
    answering(llm_server, "Hello from the stacks.")
    await fake_discord.say("hi", user=ALICE, dm=True)
    [reply] = fake_discord.sent_by_bot(dm)
    assert reply.webhook_id is None and reply.content == "**Lilith**\nHello from the stacks."
    answering(llm_server, "Hello again, from the reading room.")
    await fake_discord.click(reply, user=ALICE)
    assert reply.content == "**Lilith**\nHello again, from the reading room." and reply.buttons
    assert fake_discord.edits_of(reply.id) == [f"/channels/{dm}/messages/{reply.id}"]
    [row] = await replies(runtime)
    assert row.content == "Hello again, from the reading room."


async def test_a_reply_in_parts_is_replaced_whole(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    long = "\n\n".join([PARAGRAPH.strip()] * 3)
    answering(llm_server, long)
    await fake_discord.say("Lilith, tell me everything", user=ALICE)
    parts = fake_discord.sent_by_bot(CHANNEL)
    assert len(parts) >= 3 and [bool(p.buttons) for p in parts] == [False] * (len(parts) - 1) + [True]
    # Shorter: the first part takes it, the others go.
    answering(llm_server, "In short: monks, maps, no sea.")
    await fake_discord.click(parts[-1], user=ALICE)
    assert fake_discord.sent_by_bot(CHANNEL) == [parts[0]]
    assert parts[0].content == "In short: monks, maps, no sea." and parts[0].buttons
    assert [(r.external_id, r.content) for r in await replies(runtime)] == [
        (str(parts[0].id), "In short: monks, maps, no sea.")
    ]
    # Longer again: the first part is edited, the rest sent after it; nothing of the text is lost.
    answering(llm_server, long)
    await fake_discord.click(parts[0], user=ALICE)
    now = fake_discord.sent_by_bot(CHANNEL)
    assert now[0] is parts[0] and len(now) >= 3 and not now[0].buttons and now[-1].buttons
    rows = await replies(runtime)
    assert [r.external_id for r in rows] == [str(m.id) for m in now]
    assert " ".join(" ".join(r.content.split()) for r in rows) == " ".join(long.split())
    [memory] = await remembered(runtime.transfer, str(ALICE))
    assert "In short" not in memory["content"] and memory["source_message_ids"][1:] == [
        str(m.id) for m in now
    ]


async def test_a_failing_model_keeps_the_old_answer(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "The harbour map is in drawer nine.")
    await fake_discord.say("Lilith, where is the harbour map?", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    runtime.llm.retry.backoff_base = 0.0
    llm_server.script(Fail(500), Fail(500))
    pressed = await fake_discord.click(reply, user=ALICE)
    assert pressed.reply.ephemeral and pressed.text == UNAVAILABLE_REPLY
    assert reply.content == "The harbour map is in drawer nine." and reply.edits == 0
    assert [r.content for r in await replies(runtime)] == ["The harbour map is in drawer nine."]
    [memory] = await remembered(runtime.transfer, str(ALICE))
    assert "drawer nine" in memory["content"]


async def test_the_button_works_after_a_restart(
    fake_discord: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    answering(llm_server, "Before the restart.")
    await fake_discord.say("Lilith, hello", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    # A new bot process: nothing of the old one in memory, Discord's messages and webhook still there.
    await fake_discord.stop()
    await start_bot()
    answering(llm_server, "After the restart.")
    await fake_discord.click(reply, user=ALICE)
    assert reply.content == "After the restart."
    assert [r.content for r in await replies(runtime)] == ["After the restart."]
