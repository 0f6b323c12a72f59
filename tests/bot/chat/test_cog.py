"""Chatting with the shipped bot on the fake Discord: who gets an answer and how it is sent, stored and
remembered."""

from __future__ import annotations

import re

from bot.runtime import Runtime
from memory.chat.service import UNAVAILABLE_REPLY
from models import Personality
from testkit.fake_discord import BOT_ID, CHANNEL, PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import Fail, LLMTestServer
from tests.bot.state import StartBot, bind, rows
from tests.memory.chat.memories import remembered

ALICE, BOB = 201, 202


async def test_bound_channel_answers_as_the_personality_in_bold_without_webhooks(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Welcome to the library."
    await bind(runtime, lilith, PLAIN_CHANNEL)
    said = await fake_discord.say("hello there", channel=PLAIN_CHANNEL)
    [reply] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert reply.content == "**Lilith**\nWelcome to the library." and reply.webhook_id is None
    assert [(m.role, m.external_id, m.content) for m in await rows(runtime)] == [
        ("user", str(said.id), "hello there"),
        ("assistant", str(reply.id), "Welcome to the library."),
    ]


async def test_with_webhooks_the_reply_comes_under_the_personalitys_name(
    fake_discord: FakeDiscord,
    runtime: Runtime,
    lilith: Personality,
    sage: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Hello from the stacks."
    first = await fake_discord.say("Lilith, hello", channel=CHANNEL)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    assert reply.webhook_id is not None and reply.author["username"] == "Lilith"
    assert reply.content == "Hello from the stacks."
    # A reply to Lilith's message goes to Lilith, even with Sage bound to the channel.
    await bind(runtime, sage, CHANNEL)
    await fake_discord.say("and then?", channel=CHANNEL, reply_to=reply.id)
    second = fake_discord.sent_by_bot(CHANNEL)[-1]
    assert second.author["username"] == "Lilith" and second.id != reply.id
    # One webhook, made once and reused.
    assert [r.method for r in fake_discord.requests if r.path == f"/channels/{CHANNEL}/webhooks"] == [
        "GET",
        "POST",
    ]
    assert first.id < reply.id < second.id


async def test_messages_that_address_nobody_are_ignored(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality
) -> None:
    await fake_discord.say("just chatting about lilith")
    assert fake_discord.sent_by_bot(CHANNEL) == []
    assert await rows(runtime) == []


async def test_two_personalities_in_one_channel(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, sage: Personality
) -> None:
    await bind(runtime, lilith)
    await bind(runtime, sage)
    await fake_discord.say("Sage, how is the garden?")
    await fake_discord.say("@Lilith any new maps?")
    await fake_discord.say("and you?")  # no name: the first binding answers
    names = [m.author["username"] for m in fake_discord.sent_by_bot(CHANNEL)]
    assert names == ["Sage", "Lilith", "Lilith"]


async def test_bots_webhooks_and_the_bot_itself_never_get_an_answer(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality
) -> None:
    await bind(runtime, lilith)
    await fake_discord.say("Lilith, I am a bot", bot=True, user=555)
    await fake_discord.say("Lilith, hi from a webhook", webhook=4242, user=4242)
    itself = await fake_discord.say("Lilith, talk to yourself", user=BOT_ID, bot=True)
    assert fake_discord.sent_by_bot(CHANNEL) == [itself]  # and nothing after it
    assert await rows(runtime) == []


async def test_model_output_never_pings(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "@everyone look! <@123> and <@&456> too"
    await fake_discord.say("Lilith, ping people", channel=PLAIN_CHANNEL)
    await fake_discord.say("Lilith, ping them again", channel=CHANNEL)
    [plain] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert "@everyone" in plain.content
    sent = [
        r.payload
        for r in fake_discord.requests
        if r.method == "POST" and r.path.endswith(("/messages", "hook-token-0"))
    ]
    assert len(sent) == 2 and all(p["allowed_mentions"] == {"parse": []} for p in sent)


async def test_long_replies_are_split_and_each_part_stored(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    paragraph = "The northern maps were drawn by monks who never saw the sea. " * 20
    llm_server.responder = lambda body: f"{paragraph.strip()}\n\n{paragraph.strip()}\n\n{paragraph.strip()}"
    await fake_discord.say("Lilith, tell me everything", channel=PLAIN_CHANNEL)
    parts = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert len(parts) >= 2 and all(len(p.content) <= 2000 for p in parts)
    assert parts[-1].buttons and not any(p.buttons for p in parts[:-1])  # 🔄 on the last part only
    assistant = [m for m in await rows(runtime) if m.role == "assistant"]
    assert [m.external_id for m in assistant] == [str(p.id) for p in parts]


async def test_llm_failure_sends_a_notice_and_keeps_the_message(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    runtime.llm.retry.backoff_base = 0.0
    llm_server.script(Fail(500), Fail(500))
    await fake_discord.say("Lilith, are you there?", channel=PLAIN_CHANNEL)
    [notice] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert UNAVAILABLE_REPLY in notice.content and not notice.buttons
    assert [m.role for m in await rows(runtime)] == ["user"]


async def test_cooldown_sends_one_polite_notice(
    discord_world: FakeDiscord, start_bot: StartBot, runtime: Runtime, lilith: Personality
) -> None:
    await start_bot(cooldown_messages=1, cooldown_seconds=60)
    for text in ("Lilith, one", "Lilith, two", "Lilith, three"):
        await discord_world.say(text, channel=PLAIN_CHANNEL)
    contents = [m.content for m in discord_world.sent_by_bot(PLAIN_CHANNEL)]
    assert len(contents) == 2
    wait = re.search(r"a little fast; please wait (\d+) s before the next one", contents[1])
    assert wait is not None and 0 < int(wait.group(1)) <= 60  # what is left of the window
    users = [(m.content, m.memory_excluded) for m in await rows(runtime) if m.role == "user"]
    assert users == [("Lilith, one", None), ("Lilith, two", "refused"), ("Lilith, three", "refused")]


async def test_dm_with_a_chosen_personality(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Hello from the garden."
    dm = fake_discord.dm_channel(ALICE)
    await fake_discord.say("hi", user=ALICE, dm=True)
    assert fake_discord.sent_by_bot(dm) == []  # no personality chosen in this DM yet
    await bind(runtime, sage, dm, dm=True)
    await fake_discord.say("hi again", user=ALICE, dm=True)
    [reply] = fake_discord.sent_by_bot(dm)
    assert reply.content == "**Sage**\nHello from the garden."
    assert [m.content for m in await rows(runtime)] == ["hi again", "Hello from the garden."]


async def test_a_thread_answers_through_its_parents_binding_and_webhook(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "In the thread."
    await bind(runtime, lilith, CHANNEL)
    await fake_discord.add_thread(4001, parent_id=CHANNEL)
    await fake_discord.say("what about this?", channel=4001)
    [reply] = fake_discord.sent_by_bot(4001)
    assert reply.webhook_id is not None and reply.content == "In the thread."


async def test_remembered_exchange_gets_a_reaction(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "A dog called Biscuit, how lovely."
    said = await fake_discord.say("Lilith, my dog is called Biscuit.")
    assert fake_discord.reactions == [(CHANNEL, said.id, "📝")]
    [memory] = await remembered(runtime.transfer, str(ALICE))
    assert memory["source_message_ids"][0] == str(said.id)


async def test_no_reaction_when_disabled(
    discord_world: FakeDiscord, start_bot: StartBot, runtime: Runtime, lilith: Personality
) -> None:
    await start_bot(remembered_reaction="")
    said = await discord_world.say("Lilith, remember this quietly.")
    assert discord_world.reactions == []
    # Remembered all the same: only the reaction is off.
    memories = await remembered(runtime.transfer, str(ALICE))
    assert [m["source_message_ids"][0] for m in memories] == [str(said.id)]
