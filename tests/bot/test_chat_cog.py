"""The chat cog, loaded as the bot loads it and driven through dpytest's fake gateway, with the real
services behind it (tests/bot/conftest.py): PostgreSQL on a connection pool, Qdrant Edge, the local
embedder, and the chat LLM over HTTP on 127.0.0.1."""

from __future__ import annotations

from typing import Any
from unittest.mock import AsyncMock

import discord.ext.test as dpytest
import pytest
from discord.ext.test import backend

from bot.chat.cog import ChatCog
from bot.chat.flood import FloodControl
from bot.client import PersonaeBot
from memory.chat.service import UNAVAILABLE_REPLY
from models import Personality
from testkit.llm_server import Fail, LLMTestServer
from tests.bot.chatting import bind, raw_message, rows, say, sent_messages, settle
from tests.bot.test_senders import fake_webhook
from tests.memory.chat.memories import remembered


async def test_bound_channel_answers_as_the_personality_in_bold_without_webhooks(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Welcome to the library."
    channel = dpytest.get_config().channels[0]
    await bind(runtime, lilith, channel)
    user_message = await say("hello there", channel=channel)
    await settle()
    [reply] = sent_messages()
    assert reply.content == "**Lilith**\nWelcome to the library."
    stored = await rows(runtime)
    assert [(m.role, m.external_id, m.content) for m in stored] == [
        ("user", str(user_message.id), "hello there"),
        ("assistant", str(reply.id), "Welcome to the library."),
    ]


async def test_messages_that_address_nobody_are_ignored(
    bot: PersonaeBot, runtime: Any, lilith: Personality
) -> None:
    await say("just chatting about lilith", channel=0)
    assert sent_messages() == []
    assert await rows(runtime) == []


async def test_two_personalities_in_one_channel(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, sage: Personality
) -> None:
    channel = dpytest.get_config().channels[0]
    await bind(runtime, lilith, channel)
    await bind(runtime, sage, channel)
    await say("Sage, how is the garden?", channel=channel)
    await say("@Lilith any new maps?", channel=channel)
    await say("and you?", channel=channel)  # no name: the first binding answers
    await settle()
    names = [m.content.split("\n", 1)[0] for m in sent_messages()]
    assert names == ["**Sage**", "**Lilith**", "**Lilith**"]


async def test_bot_and_webhook_messages_never_get_an_answer(
    bot: PersonaeBot, runtime: Any, lilith: Personality
) -> None:
    channel = dpytest.get_config().channels[0]
    await bind(runtime, lilith, channel)
    me = channel.guild.me
    await say("Lilith, talk to yourself", channel=channel, member=me)
    raw_message("Lilith, hi from a webhook", channel, dpytest.get_config().members[0], webhook_id=4242)
    await dpytest.run_all_events()
    other_bot = backend.make_user("OtherBot", "0001")
    other_bot._state  # noqa: B018 - a plain user; mark it as a bot below
    other_bot.bot = True
    raw_message("Lilith, I am a bot", channel, other_bot)
    await dpytest.run_all_events()
    assert sent_messages() == []
    assert await rows(runtime) == []


async def test_model_output_never_pings(
    bot: PersonaeBot,
    cog: ChatCog,
    runtime: Any,
    lilith: Personality,
    llm_server: LLMTestServer,
    payloads: list[dict[str, Any]],
) -> None:
    llm_server.responder = lambda body: "@everyone look! <@123> and <@&456> too"
    await say("Lilith, ping people", channel=0)
    await settle()
    [reply] = sent_messages()
    assert "@everyone" in reply.content
    assert payloads and all(p["allowed_mentions"] == {"parse": []} for p in payloads)


async def test_long_replies_are_split_and_each_part_stored(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    paragraph = "The northern maps were drawn by monks who never saw the sea. " * 20
    llm_server.responder = lambda body: f"{paragraph.strip()}\n\n{paragraph.strip()}\n\n{paragraph.strip()}"
    await say("Lilith, tell me everything", channel=0)
    await settle()
    parts = sent_messages()
    assert len(parts) >= 2
    assert all(len(p.content) <= 2000 for p in parts)
    assistant = [m for m in await rows(runtime) if m.role == "assistant"]
    assert [m.external_id for m in assistant] == [str(p.id) for p in parts]


async def test_llm_failure_sends_a_notice_and_keeps_the_message(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    runtime.llm.backoff_base = 0.0
    llm_server.script(Fail(500), Fail(500))
    await say("Lilith, are you there?", channel=0)
    await settle()
    [notice] = sent_messages()
    assert UNAVAILABLE_REPLY in notice.content
    assert [m.role for m in await rows(runtime)] == ["user"]


async def test_cooldown_sends_one_polite_notice(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality
) -> None:
    cog.flood = FloodControl(messages=1, seconds=60)
    await say("Lilith, one", channel=0)
    await say("Lilith, two", channel=0)
    await say("Lilith, three", channel=0)
    await settle()
    contents = [m.content for m in sent_messages()]
    assert len(contents) == 2
    assert "a little fast" in contents[1] and "please wait 60 s" in contents[1]
    assert [m.content for m in await rows(runtime) if m.role == "user"] == ["Lilith, one"]


async def test_dm_with_a_chosen_personality(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, sage: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Hello from the garden."
    member = dpytest.get_config().members[0]
    dm = await member.create_dm()
    await say("hi", channel=dm, member=member)
    assert sent_messages() == []  # no personality chosen in this DM yet
    await bind(runtime, sage, dm)
    await say("hi again", channel=dm, member=member)
    await settle()
    [reply] = sent_messages()
    assert reply.content == "**Sage**\nHello from the garden."
    conversation_rows = await rows(runtime)
    assert [m.content for m in conversation_rows] == ["hi again", "Hello from the garden."]


async def test_remembered_exchange_gets_a_reaction(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "A dog called Biscuit, how lovely."
    # dpytest's own reaction handler predates discord.py 2.7's payload; record the HTTP call instead.
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    user_message = await say("Lilith, my dog is called Biscuit.", channel=0)
    bot.http.add_reaction.assert_awaited_once_with(user_message.channel.id, user_message.id, "📝")


async def test_failed_formation_adds_no_reaction_and_is_retried(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    memory = runtime.memory
    real_form = memory.form_pending
    monkeypatch.setattr(memory, "form_pending", AsyncMock(side_effect=RuntimeError("index down")))
    user_message = await say("Lilith, remember the lighthouse on Friday.", channel=0)
    bot.http.add_reaction.assert_not_awaited()
    # The catch-up pass (on start and on a timer) forms it later; the message was never marked done.
    monkeypatch.setattr(memory, "form_pending", real_form)
    assert await cog.pending.form() == 1
    assert str(user_message.id) in [
        i
        for m in await remembered(runtime.user_settings, str(user_message.author.id))
        for i in m["source_message_ids"]
    ]


async def test_no_reaction_when_disabled(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality
) -> None:
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    cog.reaction.emoji = ""
    user_message = await say("Lilith, remember this quietly.", channel=0)
    bot.http.add_reaction.assert_not_awaited()
    # Remembered all the same: only the reaction is off.
    memories = await remembered(runtime.user_settings, str(user_message.author.id))
    assert [m["source_message_ids"][0] for m in memories] == [str(user_message.id)]


async def test_webhook_path_and_reply_routing(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, sage: Personality
) -> None:
    channel = dpytest.get_config().channels[0]
    # Manage Webhooks granted in this channel (through @everyone: dpytest's member overwrites lack a type).
    await dpytest.set_permission_overrides(channel.guild.default_role, channel, manage_webhooks=True)
    assert channel.permissions_for(channel.guild.me).manage_webhooks
    ids: list[int] = []
    webhook = fake_webhook(ids)
    sender = cog.senders.webhook
    assert type(sender).__name__ == "WebhookSender"
    sender._webhooks[channel.id] = webhook
    await say("Lilith, hello", channel=channel)
    await settle()
    assert sent_messages() == []  # nothing through the bot's own account
    kwargs = webhook.send.await_args.kwargs
    assert kwargs["username"] == "Lilith"
    assert kwargs["allowed_mentions"].to_dict() == {"parse": []}
    assert kwargs["wait"] is True
    # A reply to Lilith's webhook message goes to Lilith, even with Sage bound to the channel.
    await bind(runtime, sage, channel)
    member = dpytest.get_config().members[0]
    reference = {"message_id": ids[0], "channel_id": channel.id, "guild_id": channel.guild.id}
    raw_message("and then?", channel, member, message_reference=reference)
    await dpytest.run_all_events()
    await settle()
    assert webhook.send.await_count == 2
    assert webhook.send.await_args.kwargs["username"] == "Lilith"
