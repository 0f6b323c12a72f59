"""Catching up, through the chat cog on dpytest with the real services: what was said while the bot was
offline (messages put in the fake channels' history without any gateway event) is read back on READY,
stored once, remembered with its 📝, and answered only when recent; memories formed by the periodic
pass get their 📝 too; what was said incognito is answered all the same, and never remembered."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import AsyncMock

import discord
import discord.ext.test as dpytest
import pytest
from discord.ext.test import backend, factories

from bot.chat.cog import ChatCog
from bot.client import PersonaeBot
from memory.chat.service import ChatRequest
from memory.owners.incognito import IncognitoService
from models import Personality
from testkit.llm_server import LLMTestServer
from tests.bot.chatting import bind, rows, say, sent_messages, settle
from tests.bot.test_senders import fake_webhook
from tests.memory.chat.memories import remembered


def offline(channel: Any, author: Any, content: str, *, ago: timedelta, **extra: Any) -> int:
    """A message said while the bot was away: in the channel's history, no event dispatched."""
    message_id = discord.utils.time_snowflake(datetime.now(UTC) - ago)
    data = factories.make_message_dict(channel, author, message_id, content=content, **extra)
    backend._cur_config.messages.setdefault(channel.id, []).append(data)
    return message_id


async def stored_before(runtime: Any, personality: Personality, channel: Any, author: Any, text: str) -> int:
    """A message the bot stored before it went offline (and the channel's history holds)."""
    message_id = offline(channel, author, text, ago=timedelta(hours=3))
    await runtime.chat.store_user_message(
        ChatRequest(
            personality_id=personality.id,
            user_id=str(author.id),
            user_name=author.display_name,
            guild_id=str(channel.guild.id),
            channel_id=str(channel.id),
            message_id=str(message_id),
            text=text,
            created_at=discord.utils.snowflake_time(message_id),
        )
    )
    return message_id


async def reconnect(bot: PersonaeBot) -> None:
    """READY (it comes again with every new session) and RESUMED, then the work they started."""
    bot.dispatch("ready")
    bot.dispatch("resumed")
    await dpytest.run_all_events()
    await settle()


async def test_missed_messages_are_stored_remembered_and_answered_only_when_recent(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Try The Dispossessed."
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    config = dpytest.get_config()
    garden = config.channels[0]
    library = backend.make_text_channel("library", garden.guild)
    alice, bob = config.members[0], config.members[1]
    for channel in (garden, library):
        await bind(runtime, lilith, channel)
    await stored_before(runtime, lilith, garden, alice, "Lilith, I'm off to the market.")
    await stored_before(runtime, lilith, library, bob, "Lilith, I finished my book.")
    old = offline(garden, alice, "Lilith, I planted the tomatoes.", ago=timedelta(hours=2))
    recent = offline(library, bob, "Lilith, what should I read next?", ago=timedelta(minutes=1))
    offline(library, alice, "", ago=timedelta(seconds=30))  # an embed or a sticker: nothing to store

    await reconnect(bot)

    [reply] = sent_messages()  # the recent one only, once, though READY and RESUMED both came
    assert reply.channel.id == library.id and reply.content == "**Lilith**\nTry The Dispossessed."
    log = [(m.role, m.external_id) for m in await rows(runtime)]
    assert ("user", str(old)) in log and ("user", str(recent)) in log
    assert ("assistant", str(reply.id)) in log and len(log) == 5
    books = await remembered(runtime.user_settings, str(bob.id))
    assert str(recent) in [i for m in books for i in m["source_message_ids"]]
    bot.http.add_reaction.assert_any_await(library.id, recent, "📝")

    # Another session later: nothing is stored twice, nothing answered twice.
    await reconnect(bot)
    assert sent_messages() == []
    assert len(await rows(runtime)) == 5

    # The old message got no answer of its own and waits for none: Alice's next answered message
    # takes it (and the one stored before the bot went away) into her memory at once.
    await say("Lilith, any tips for watering?", channel=garden, member=alice)
    garden_memories = await remembered(runtime.user_settings, str(alice.id))
    sources = [i for m in garden_memories for i in m["source_message_ids"]]
    assert str(old) in sources


async def test_replies_found_in_the_history_are_stored_not_sent_again(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality
) -> None:
    config = dpytest.get_config()
    plain = config.channels[0]
    hooked = backend.make_text_channel("hooked", plain.guild)
    alice = config.members[0]
    await dpytest.set_permission_overrides(hooked.guild.default_role, hooked, manage_webhooks=True)
    webhook = fake_webhook([])
    webhook.id = 4242
    sender = cog.senders.webhook
    assert type(sender).__name__ == "WebhookSender"
    sender._webhooks[hooked.id] = webhook
    for channel in (plain, hooked):
        await bind(runtime, lilith, channel)
    # The bot stopped after sending these replies, before storing them.
    asked = await stored_before(runtime, lilith, plain, alice, "Lilith, good morning")
    as_the_bot = offline(plain, plain.guild.me, "**Lilith**\n**Morning!**\nTea?", ago=timedelta(minutes=2))
    await stored_before(runtime, lilith, hooked, alice, "Lilith, hello")
    missed = offline(hooked, alice, "Lilith, any news?", ago=timedelta(minutes=2))
    lilith_hook = backend.make_user("Lilith", "0002")
    by_webhook = offline(hooked, lilith_hook, "None today.", ago=timedelta(minutes=1), webhook_id=4242)
    impostor = backend.make_user("Lilith", "0003")
    offline(hooked, impostor, "I am Lilith too.", ago=timedelta(seconds=30), webhook_id=99)

    await cog.missed.read_all()
    await settle()

    assert sent_messages() == [] and webhook.send.await_count == 0
    log = [(m.role, m.external_id, m.content) for m in await rows(runtime)]
    assert ("user", str(asked), "Lilith, good morning") in log
    assert ("assistant", str(as_the_bot), "**Morning!**\nTea?") in log
    assert ("user", str(missed), "Lilith, any news?") in log
    assert ("assistant", str(by_webhook), "None today.") in log
    assert len(log) == 5  # the other webhook's message is nobody's reply


async def test_memories_formed_by_the_periodic_pass_get_their_reaction(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    memory = runtime.memory
    real_form = memory.form_pending
    monkeypatch.setattr(memory, "form_pending", AsyncMock(side_effect=RuntimeError("index down")))
    message = await say("Lilith, remember the lighthouse on Friday.", channel=0)
    bot.http.add_reaction.assert_not_awaited()
    monkeypatch.setattr(memory, "form_pending", real_form)
    assert await cog.pending.form() == 1
    bot.http.add_reaction.assert_awaited_once_with(message.channel.id, message.id, "📝")


async def test_a_process_reads_back_only_the_channels_of_its_own_shards(
    bot: PersonaeBot, cog: ChatCog, runtime: Any
) -> None:
    """Two bot processes splitting the shards never read (store, answer) the same missed messages."""
    config = dpytest.get_config()
    garden, alice = config.channels[0], config.members[0]
    dm = await alice.create_dm()
    assert isinstance(bot, discord.AutoShardedClient)  # the sharded client production runs
    assert await cog.missed._channel(str(garden.id)) is garden
    assert await cog.missed._channel(str(dm.id)) is dm  # DMs arrive on shard 0, which it runs
    bot.shard_ids = [1]  # as a process started with SHARD_COUNT=2 SHARD_IDS=[1]
    assert await cog.missed._channel(str(dm.id)) is None
    assert await cog.missed._channel(str(garden.id)) is garden  # its guild is served here


def reacted(bot: PersonaeBot) -> set[int]:
    """The ids of the messages that got the 📝."""
    return {call.args[1] for call in bot.http.add_reaction.await_args_list if call.args[2] == "📝"}


async def test_what_was_said_incognito_while_offline_is_never_remembered_though_the_span_ended(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Good to have you back."
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    config = dpytest.get_config()
    garden, alice = config.channels[0], config.members[0]
    await bind(runtime, lilith, garden)
    market = await stored_before(runtime, lilith, garden, alice, "Lilith, I'm off to the market.")
    # Incognito with Lilith for an hour, from 2h30 to 1h30 ago: over long before the bot is back.
    then = datetime.now(UTC) - timedelta(hours=2, minutes=30)
    await IncognitoService(runtime.sessionmaker, clock=lambda: then).start(
        str(alice.id), lilith.id, timedelta(hours=1)
    )
    secret = offline(garden, alice, "Lilith, my bank PIN is 4921.", ago=timedelta(hours=2))
    recent = offline(garden, alice, "Lilith, I'm back from the market.", ago=timedelta(minutes=1))

    await reconnect(bot)

    [reply] = sent_messages()  # the recent one is answered
    excluded = {m.external_id: m.memory_excluded for m in await rows(runtime)}
    assert excluded[str(secret)] == "incognito" and excluded[str(recent)] is None
    [memory] = await remembered(runtime.user_settings, str(alice.id))
    # What Alice said before the span joins her next answered exchange; what she said in it, nothing.
    assert memory["source_message_ids"] == [str(market), str(recent), str(reply.id)]
    assert "4921" not in json.dumps(memory)
    assert recent in reacted(bot) and secret not in reacted(bot)
    assert (await runtime.memory.form_pending()).memories == 0  # a later pass adds nothing


async def test_a_missed_message_said_incognito_is_answered_without_a_memory(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "I'm here."
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    config = dpytest.get_config()
    garden, alice = config.channels[0], config.members[0]
    await bind(runtime, lilith, garden)
    await stored_before(runtime, lilith, garden, alice, "Lilith, hello.")
    # Turned on five minutes ago, for every personality, until off: still on.
    since = datetime.now(UTC) - timedelta(minutes=5)
    await IncognitoService(runtime.sessionmaker, clock=lambda: since).start(str(alice.id), None, None)
    offline(garden, alice, "Lilith, are you there? My PIN is 4921.", ago=timedelta(minutes=1))

    await reconnect(bot)

    [reply] = sent_messages()
    assert reply.content == "**Lilith**\nI'm here."
    bot.http.add_reaction.assert_not_awaited()
    assert await remembered(runtime.user_settings, str(alice.id)) == []
    assert {m.memory_excluded for m in await rows(runtime) if m.content != "Lilith, hello."} == {"incognito"}
