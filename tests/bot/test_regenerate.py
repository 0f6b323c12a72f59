"""The 🔄 button on a personality's latest reply, pressed through discord.py's view store with real
Interaction objects, on a fake Discord that keeps the messages (tests/bot/channels.py), with the real
services, PostgreSQL, Qdrant Edge and the chat LLM over HTTP behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from memory.chat.regenerate import NOT_LATEST, NOT_YOURS
from memory.chat.service import UNAVAILABLE_REPLY
from models import Message, Personality
from testkit.llm_server import Fail, LLMTestServer
from tests.bot.channels import CHANNEL, DM_CHANNEL, ChannelHTTP, Channels, chat_requests, open_channels
from tests.memory.chat.memories import remembered

ALICE = 201
BOB = 202
PARAGRAPH = "The northern maps were drawn by monks who never saw the sea. " * 20


@pytest.fixture
async def channels(runtime: Any, lilith: Personality) -> AsyncIterator[Channels]:
    async with open_channels(runtime) as channels:
        yield channels


async def replies(runtime: Any) -> list[Message]:
    async with runtime.sessionmaker() as session:
        return list(
            (
                await session.scalars(select(Message).where(Message.role == "assistant").order_by(Message.id))
            ).all()
        )


def answering(llm_server: LLMTestServer, text: str) -> None:
    llm_server.responder = lambda body: text


async def test_regenerate_replaces_the_reply_in_place_and_remembers_only_the_new_answer(
    channels: Channels, runtime: Any, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "Mochi is a fine name for a lighthouse keeper's cat.")
    asked = await channels.say("Lilith, my cat is called Mochi.", user=ALICE)
    [reply] = channels.http.in_channel(CHANNEL)
    assert reply.webhook_id is not None and reply.username == "Lilith"
    assert [b["emoji"]["name"] for b in reply.buttons] == ["🔄"]
    [old] = await remembered(runtime.user_settings, str(ALICE))
    assert "lighthouse keeper" in old["content"]
    first_prompt = chat_requests(llm_server)[-1]["messages"]

    answering(llm_server, "Mochi! Does she sleep on the warm maps too?")
    pressed = await channels.press(reply, user=ALICE)
    # The same message was answered again, with the same prompt (the old answer's memory not in it).
    assert chat_requests(llm_server)[-1]["messages"] == first_prompt
    # In place: the webhook's message edited, its button kept; the "thinking…" note gone.
    assert channels.http.in_channel(CHANNEL) == [reply]
    assert reply.content == "Mochi! Does she sleep on the warm maps too?"
    assert [b["emoji"]["name"] for b in reply.buttons] == ["🔄"]
    [edit] = channels.http.edits_of(reply.id)
    assert edit.startswith(f"/webhooks/{reply.webhook_id}/")
    assert pressed.replies == []
    # One reply row, the new text in it; the memory formed from the new answer only.
    [row] = await replies(runtime)
    assert (row.external_id, row.content) == (str(reply.id), reply.content)
    [new] = await remembered(runtime.user_settings, str(ALICE))
    assert "warm maps" in new["content"] and "lighthouse keeper" not in new["content"]
    assert new["source_message_ids"] == [str(asked), str(reply.id)]


async def test_only_the_user_answered_may_regenerate(
    channels: Channels, runtime: Any, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "Welcome to the library.")
    await channels.say("Lilith, hello", user=ALICE)
    [reply] = channels.http.in_channel(CHANNEL)
    asked = len(chat_requests(llm_server))
    refused = await channels.press(reply, user=BOB)
    assert refused.reply.ephemeral and refused.text == NOT_YOURS
    assert reply.content == "Welcome to the library." and reply.edits == 0 and reply.buttons
    assert len(chat_requests(llm_server)) == asked  # the model was not asked again
    assert [r.content for r in await replies(runtime)] == ["Welcome to the library."]


async def test_an_older_reply_cannot_be_regenerated_and_loses_its_button(
    channels: Channels, runtime: Any, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "The first answer.")
    await channels.say("Lilith, one", user=ALICE)
    answering(llm_server, "The second answer.")
    await channels.say("Lilith, two", user=ALICE)
    first, second = channels.http.in_channel(CHANNEL)
    asked = len(chat_requests(llm_server))
    refused = await channels.press(first, user=ALICE)
    assert refused.reply.ephemeral and refused.text == NOT_LATEST
    assert first.content == "The first answer." and first.buttons == []
    assert len(chat_requests(llm_server)) == asked
    # The latest one still can.
    answering(llm_server, "The second answer, again.")
    await channels.press(second, user=ALICE)
    assert [r.content for r in await replies(runtime)] == ["The first answer.", "The second answer, again."]


async def test_in_a_dm_the_bots_own_message_is_edited(
    channels: Channels, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    await runtime.bindings.bind(
        personality_id=lilith.id, channel_id=str(DM_CHANNEL), guild_id=None, user_id=str(ALICE)
    )
    answering(llm_server, "Hello from the stacks.")
    await channels.say("hi", user=ALICE, guild=None)
    [reply] = channels.http.in_channel(DM_CHANNEL)
    assert reply.webhook_id is None and reply.content == "**Lilith**\nHello from the stacks."
    answering(llm_server, "Hello again, from the reading room.")
    await channels.press(reply, user=ALICE, guild=None)
    assert reply.content == "**Lilith**\nHello again, from the reading room." and reply.buttons
    assert channels.http.edits_of(reply.id) == [f"/channels/{DM_CHANNEL}/messages/{reply.id}"]
    [row] = await replies(runtime)
    assert row.content == "Hello again, from the reading room."


async def test_a_reply_in_parts_is_replaced_whole(
    channels: Channels, runtime: Any, llm_server: LLMTestServer
) -> None:
    long = "\n\n".join([PARAGRAPH.strip()] * 3)
    answering(llm_server, long)
    await channels.say("Lilith, tell me everything", user=ALICE)
    parts = channels.http.in_channel(CHANNEL)
    assert len(parts) >= 3 and [bool(p.buttons) for p in parts] == [False] * (len(parts) - 1) + [True]
    # Shorter: the first part takes it, the others go.
    answering(llm_server, "In short: monks, maps, no sea.")
    await channels.press(parts[-1], user=ALICE)
    assert channels.http.in_channel(CHANNEL) == [parts[0]]
    assert parts[0].content == "In short: monks, maps, no sea." and parts[0].buttons
    assert [(r.external_id, r.content) for r in await replies(runtime)] == [
        (str(parts[0].id), "In short: monks, maps, no sea.")
    ]
    # Longer again: the first part is edited, the rest sent after it; nothing of the text is lost.
    answering(llm_server, long)
    await channels.press(parts[0], user=ALICE)
    now = channels.http.in_channel(CHANNEL)
    assert now[0] is parts[0] and len(now) >= 3 and not now[0].buttons and now[-1].buttons
    rows = await replies(runtime)
    assert [r.external_id for r in rows] == [str(m.id) for m in now]
    assert " ".join(" ".join(r.content.split()) for r in rows) == " ".join(long.split())
    [memory] = await remembered(runtime.user_settings, str(ALICE))
    assert "In short" not in memory["content"] and memory["source_message_ids"][1:] == [
        str(m.id) for m in now
    ]


async def test_a_failing_model_keeps_the_old_answer(
    channels: Channels, runtime: Any, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "The harbour map is in drawer nine.")
    await channels.say("Lilith, where is the harbour map?", user=ALICE)
    [reply] = channels.http.in_channel(CHANNEL)
    runtime.llm.backoff_base = 0.0
    llm_server.script(Fail(500), Fail(500))
    pressed = await channels.press(reply, user=ALICE)
    assert pressed.reply.ephemeral and pressed.text == UNAVAILABLE_REPLY
    assert reply.content == "The harbour map is in drawer nine." and reply.edits == 0
    assert [r.content for r in await replies(runtime)] == ["The harbour map is in drawer nine."]
    [memory] = await remembered(runtime.user_settings, str(ALICE))
    assert "drawer nine" in memory["content"]


async def test_the_button_works_after_a_restart(
    runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    answering(llm_server, "Before the restart.")
    async with open_channels(runtime) as before:
        await before.say("Lilith, hello", user=ALICE)
        [reply] = before.http.in_channel(CHANNEL)
        discord_side: ChannelHTTP = before.http
    # A new bot process: nothing of the old one in memory, Discord's messages and webhook still there.
    async with open_channels(runtime) as after:
        after.http.messages[reply.id] = reply
        after.http.hooks = discord_side.hooks
        after.http._ids = discord_side._ids
        answering(llm_server, "After the restart.")
        await after.press(reply, user=ALICE)
    assert reply.content == "After the restart."
    assert [r.content for r in await replies(runtime)] == ["After the restart."]
