"""Catching up, on the fake Discord: what was said while the bot was away (messages in the channels'
history without any event) is read back when it connects (READY) or resumes (RESUMED), stored once,
remembered with its 📝, and answered only when recent; memories formed by the periodic pass get their
📝 too; what was said incognito is answered all the same, and never remembered; a process reads back
only the channels of its own shards."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import BigInteger, func, literal, select

from bot.runtime import Runtime
from memory.chat.service import ChatRequest
from memory.formation.forming import CLAIM_LOCK_SPACE
from memory.owners.incognito import IncognitoService
from models import Personality
from testkit.fake_discord import CHANNEL, GUILD, PLAIN_CHANNEL, FakeDiscord, SentMessage
from testkit.llm_server import LLMTestServer
from tests.bot.state import StartBot, bind, rows
from tests.memory.chat.memories import remembered

ALICE, BOB = 201, 202
LIBRARY = 502


async def stored_before(
    runtime: Runtime, discord: FakeDiscord, personality: Personality, text: str, *, user: int, channel: int
) -> SentMessage:
    """A message the bot stored before it went away (and the channel's history holds)."""
    message = discord.said_while_away(text, user=user, channel=channel, ago=timedelta(hours=3))
    async with runtime.chat.catching_up(str(channel)) as filing:
        await filing.message(
            ChatRequest(
                personality_id=personality.id,
                user_id=str(user),
                user_name=f"user{user}",
                guild_id=str(GUILD),
                channel_id=str(channel),
                message_id=str(message.id),
                text=text,
                created_at=message.created_at,
            )
        )
    return message


async def test_missed_messages_are_stored_remembered_and_answered_only_when_recent(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Try The Dispossessed."
    discord_world.add_channel(LIBRARY, name="library", webhooks=False)
    for channel in (PLAIN_CHANNEL, LIBRARY):
        await bind(runtime, lilith, channel)
    await stored_before(
        runtime, discord_world, lilith, "Lilith, I'm off to the market.", user=ALICE, channel=PLAIN_CHANNEL
    )
    await stored_before(
        runtime, discord_world, lilith, "Lilith, I finished my book.", user=BOB, channel=LIBRARY
    )
    old = discord_world.said_while_away(
        "Lilith, I planted the tomatoes.", channel=PLAIN_CHANNEL, ago=timedelta(hours=2)
    )
    recent = discord_world.said_while_away(
        "Lilith, what should I read next?", user=BOB, channel=LIBRARY, ago=timedelta(minutes=1)
    )
    discord_world.said_while_away("", channel=LIBRARY, ago=timedelta(seconds=30))  # an embed or a sticker

    await start_bot()  # READY

    assert discord_world.sent_by_bot(PLAIN_CHANNEL) == []
    [reply] = discord_world.sent_by_bot(LIBRARY)  # the recent one only
    assert reply.content == "**Lilith**\nTry The Dispossessed."
    log = [(m.role, m.external_id) for m in await rows(runtime)]
    assert ("user", str(old.id)) in log and ("user", str(recent.id)) in log
    assert ("assistant", str(reply.id)) in log and len(log) == 5
    books = await remembered(runtime.transfer, str(BOB))
    assert str(recent.id) in [i for m in books for i in m["source_message_ids"]]
    assert recent.id in discord_world.reacted()

    # Resumed later: nothing is stored twice, nothing answered twice.
    await discord_world.reconnect()
    assert discord_world.sent_by_bot(LIBRARY) == [reply]
    assert len(await rows(runtime)) == 5

    # The old message got no answer of its own and waits for none: Alice's next answered message
    # takes it (and the one stored before the bot went away) into her memory at once.
    await discord_world.say("Lilith, any tips for watering?", channel=PLAIN_CHANNEL)
    sources = [i for m in await remembered(runtime.transfer, str(ALICE)) for i in m["source_message_ids"]]
    assert str(old.id) in sources


async def test_replies_found_in_the_history_are_stored_not_sent_again(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Hello."
    for channel in (PLAIN_CHANNEL, CHANNEL):
        await bind(runtime, lilith, channel)
    # The bot makes its webhook in the hooked channel, then stops.
    await start_bot()
    await discord_world.say("Lilith, hi", channel=CHANNEL)
    [hook] = discord_world.webhooks.values()
    await discord_world.stop()
    # It stopped again after sending these replies, before storing them.
    asked = await stored_before(
        runtime, discord_world, lilith, "Lilith, good morning", user=ALICE, channel=PLAIN_CHANNEL
    )
    as_the_bot = discord_world.sent_while_away(
        "**Lilith**\n**Morning!**\nTea?", channel=PLAIN_CHANNEL, name="Lilith", webhook=None
    )
    missed = discord_world.said_while_away("Lilith, any news?", channel=CHANNEL, ago=timedelta(0))
    by_webhook = discord_world.sent_while_away("None today.", channel=CHANNEL, name="Lilith", webhook=hook.id)
    discord_world.sent_while_away("I am Lilith too.", channel=CHANNEL, name="Lilith", webhook=99)  # not ours
    before = len(discord_world.sent_by_bot(CHANNEL)) + len(discord_world.sent_by_bot(PLAIN_CHANNEL))

    await start_bot()

    assert len(discord_world.sent_by_bot(CHANNEL)) + len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == before
    log = [(m.role, m.external_id, m.content) for m in await rows(runtime)]
    assert ("user", str(asked.id), "Lilith, good morning") in log
    assert ("assistant", str(as_the_bot.id), "**Morning!**\nTea?") in log
    assert ("user", str(missed.id), "Lilith, any news?") in log
    assert ("assistant", str(by_webhook.id), "None today.") in log
    assert len(log) == 6  # the first exchange, these four; the other webhook's message is nobody's reply


async def test_memories_formed_by_the_periodic_pass_get_their_reaction(
    fake_discord: FakeDiscord, start_bot: StartBot, runtime: Runtime, lilith: Personality
) -> None:
    await fake_discord.say("Lilith, hello.")
    [first] = fake_discord.in_channel(CHANNEL)[:1]
    conversation = (await rows(runtime))[0].conversation_id
    # Another process (a worker) holds the conversation while the reply is formed: left pending.
    async with runtime.sessionmaker.begin() as worker:
        await worker.execute(
            select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + conversation, BigInteger)))
        )
        said = await fake_discord.say("Lilith, remember the lighthouse on Friday.")
    assert said.id not in fake_discord.reacted() and first.id in fake_discord.reacted()
    # Restarted with the timer on: its pass at start forms it, and the 📝 comes.
    await fake_discord.stop()
    await start_bot(catch_up_seconds=3600)
    await fake_discord.wait_until(lambda: said.id in fake_discord.reacted())
    sources = [i for m in await remembered(runtime.transfer, str(ALICE)) for i in m["source_message_ids"]]
    assert str(said.id) in sources


async def test_what_was_said_incognito_while_away_is_never_remembered_though_the_span_ended(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Good to have you back."
    await bind(runtime, lilith, PLAIN_CHANNEL)
    market = await stored_before(
        runtime, discord_world, lilith, "Lilith, I'm off to the market.", user=ALICE, channel=PLAIN_CHANNEL
    )
    # Incognito with Lilith for an hour, from 2h30 to 1h30 ago: over long before the bot is back.
    then = datetime.now(UTC) - timedelta(hours=2, minutes=30)
    await IncognitoService(runtime.sessionmaker, clock=lambda: then).start(
        str(ALICE), lilith.id, timedelta(hours=1)
    )
    secret = discord_world.said_while_away(
        "Lilith, my bank PIN is 4921.", channel=PLAIN_CHANNEL, ago=timedelta(hours=2)
    )
    recent = discord_world.said_while_away(
        "Lilith, I'm back from the market.", channel=PLAIN_CHANNEL, ago=timedelta(minutes=1)
    )

    await start_bot()

    [reply] = discord_world.sent_by_bot(PLAIN_CHANNEL)  # the recent one is answered
    excluded = {m.external_id: m.memory_excluded for m in await rows(runtime)}
    assert excluded[str(secret.id)] == "incognito" and excluded[str(recent.id)] is None
    [memory] = await remembered(runtime.transfer, str(ALICE))
    # What Alice said before the span joins her next answered exchange; what she said in it, nothing.
    assert memory["source_message_ids"] == [str(market.id), str(recent.id), str(reply.id)]
    # Its words, not its ids: a random snowflake may hold the digits 4921.
    words = json.dumps({k: v for k, v in memory.items() if k not in ("id", "source_message_ids")})
    assert "4921" not in words and "PIN" not in words
    assert recent.id in discord_world.reacted() and secret.id not in discord_world.reacted()
    assert (await runtime.memory.form_pending()).memories == 0  # a later pass adds nothing


async def test_a_missed_message_said_incognito_is_answered_without_a_memory(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "I'm here."
    await bind(runtime, lilith, PLAIN_CHANNEL)
    await stored_before(runtime, discord_world, lilith, "Lilith, hello.", user=ALICE, channel=PLAIN_CHANNEL)
    # Turned on five minutes ago, for every personality, until off: still on.
    since = datetime.now(UTC) - timedelta(minutes=5)
    await IncognitoService(runtime.sessionmaker, clock=lambda: since).start(str(ALICE), None, None)
    discord_world.said_while_away(
        "Lilith, are you there? My PIN is 4921.", channel=PLAIN_CHANNEL, ago=timedelta(minutes=1)
    )

    await start_bot()

    [reply] = discord_world.sent_by_bot(PLAIN_CHANNEL)
    assert reply.content == "**Lilith**\nI'm here."
    assert discord_world.reactions == []
    assert await remembered(runtime.transfer, str(ALICE)) == []
    assert {m.memory_excluded for m in await rows(runtime) if m.content != "Lilith, hello."} == {"incognito"}


async def test_a_process_reads_back_only_the_channels_of_its_own_shards(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    """Two bot processes splitting the shards never read (store, answer) the same missed messages: the
    guild is on shard 0, and DMs arrive on shard 0 too."""
    llm_server.responder = lambda body: "Back again."
    dm = discord_world.dm_channel(ALICE)
    await bind(runtime, lilith, PLAIN_CHANNEL)
    await bind(runtime, lilith, dm, dm=True)
    await stored_before(runtime, discord_world, lilith, "Lilith, hello.", user=ALICE, channel=PLAIN_CHANNEL)
    discord_world.said_while_away("Lilith, still there?", channel=PLAIN_CHANNEL, ago=timedelta(minutes=1))
    discord_world.said_while_away("hello in private", dm=True, ago=timedelta(0))  # after the binding

    await start_bot(shard_count=2, shard_ids=[1])  # as a process started with SHARD_COUNT=2 SHARD_IDS=[1]
    assert discord_world.sent_by_bot(PLAIN_CHANNEL) == [] and discord_world.sent_by_bot(dm) == []
    assert len(await rows(runtime)) == 1
    await discord_world.stop()

    await start_bot(shard_count=2, shard_ids=[0])  # the other process
    assert len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == 1 and len(discord_world.sent_by_bot(dm)) == 1


async def test_an_older_missed_line_of_an_answered_user_is_remembered_with_their_newest(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    """Two users spoke twice each while the bot was away in a bound channel: each one's newest line is
    answered, and the older line of each joins that answer's memory at once, with its 📝 (issue 20, 4)."""
    llm_server.responder = lambda body: "Noted."
    await bind(runtime, lilith, PLAIN_CHANNEL)
    await stored_before(runtime, discord_world, lilith, "Lilith, hello.", user=ALICE, channel=PLAIN_CHANNEL)
    said = [
        discord_world.said_while_away(text, user=user, channel=PLAIN_CHANNEL, ago=timedelta(minutes=minutes))
        for text, user, minutes in (
            ("my umbrella is red", ALICE, 4),
            ("my scarf is blue", BOB, 3),
            ("Lilith, my train leaves at nine", ALICE, 2),
            ("Lilith, my bus is 42", BOB, 1),
        )
    ]
    umbrella, scarf, train, bus = said

    await start_bot()

    assert len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == 2  # the newest line of each
    for user, older, newest in ((ALICE, umbrella, train), (BOB, scarf, bus)):
        sources = [i for m in await remembered(runtime.transfer, str(user)) for i in m["source_message_ids"]]
        assert str(older.id) in sources and str(newest.id) in sources
    assert {m.id for m in said} <= discord_world.reacted()
    assert all(m.memory_processed_at is not None for m in await rows(runtime) if m.role == "user")


async def test_missed_lines_that_name_a_personality_in_an_unbound_channel_are_read_back(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    """As the README promises: what was said to a personality while the bot was away is read back, in a
    channel bound to nobody too; channels with nothing new are not read (issue 20, 5)."""
    llm_server.responder = lambda body: "Pixel is a fine name."
    discord_world.add_channel(LIBRARY, name="library", webhooks=False)
    discord_world.said_while_away("quiet in here", channel=LIBRARY, ago=timedelta(hours=1))
    await start_bot()
    await discord_world.say("Lilith, hello.", channel=CHANNEL)  # the bot was up: the guild's last word
    await discord_world.stop()
    old = discord_world.said_while_away(
        "Lilith, I repotted the fern.", user=BOB, channel=PLAIN_CHANNEL, ago=timedelta(0)
    )
    discord_world.said_while_away("just chatting", user=BOB, channel=PLAIN_CHANNEL, ago=timedelta(0))
    discord_world.said_while_away("quiet in the library", user=BOB, channel=LIBRARY, ago=timedelta(0))
    cat = discord_world.said_while_away(
        "Lilith, while you were away: my cat is called Pixel",
        user=BOB,
        channel=PLAIN_CHANNEL,
        ago=timedelta(0),
    )
    before = len(discord_world.requests)

    await start_bot(missed_reply_minutes=10)

    [reply] = discord_world.sent_by_bot(PLAIN_CHANNEL)  # the newest is answered, the one before remembered
    assert reply.content == "**Lilith**\nPixel is a fine name."
    sources = [i for m in await remembered(runtime.transfer, str(BOB)) for i in m["source_message_ids"]]
    assert str(old.id) in sources and str(cat.id) in sources
    assert {old.id, cat.id} <= discord_world.reacted()
    read = [
        r.path for r in discord_world.requests[before:] if r.method == "GET" and r.path.endswith("/messages")
    ]
    # General had nothing new; the library only chatter, read once.
    assert sorted(read) == [f"/channels/{PLAIN_CHANNEL}/messages", f"/channels/{LIBRARY}/messages"]

    await discord_world.say("still chatting", user=BOB, channel=LIBRARY)  # live, naming nobody
    await discord_world.reconnect()
    before = len(discord_world.requests)
    await discord_world.reconnect()  # read again: nothing stored or answered twice, nothing read twice
    assert discord_world.sent_by_bot(PLAIN_CHANNEL) == [reply]
    assert not [
        r for r in discord_world.requests[before:] if r.method == "GET" and r.path.endswith("/messages")
    ]
    assert len([m for m in await rows(runtime) if m.author_id == str(BOB)]) == 2
