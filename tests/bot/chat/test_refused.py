"""Refused messages stay refused (issue 33, 4), on the fake Discord: a message over the flood limit gets
its notice as before, and is stored as refused; a catch-up after a restart or a gateway resume never
answers it, and no memory is made of it, nor of it as the context of its author's next exchange."""

from __future__ import annotations

import json

from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import PLAIN_CHANNEL, FakeDiscord, SentMessage
from testkit.llm_server import LLMTestServer
from tests.bot.state import StartBot, bind, rows
from tests.memory.chat.memories import remembered

ALICE = 201
DOOR_CODE = "Lilith, the door code is 4921."


async def refused_after_an_answer(
    discord_world: FakeDiscord, start_bot: StartBot, runtime: Runtime, lilith: Personality
) -> tuple[SentMessage, SentMessage, SentMessage]:
    """One message answered, then one over the limit: (the answer, the refused message, the notice)."""
    await bind(runtime, lilith, PLAIN_CHANNEL)
    await start_bot(cooldown_messages=1, cooldown_seconds=60)
    await discord_world.say("Lilith, good morning.", user=ALICE, channel=PLAIN_CHANNEL)
    refused = await discord_world.say(DOOR_CODE, user=ALICE, channel=PLAIN_CHANNEL)
    reply, notice = discord_world.sent_by_bot(PLAIN_CHANNEL)
    assert "you're sending messages a little fast" in notice.content  # what the user sees, as today
    return reply, refused, notice


async def assert_not_answered(
    discord_world: FakeDiscord, runtime: Runtime, refused: SentMessage, seen: list[SentMessage]
) -> None:
    assert discord_world.sent_by_bot(PLAIN_CHANNEL) == seen  # not answered late
    excluded = {m.external_id: m.memory_excluded for m in await rows(runtime)}
    assert excluded[str(refused.id)] == "refused"


async def assert_not_remembered(
    discord_world: FakeDiscord,
    runtime: Runtime,
    llm_server: LLMTestServer,
    refused: SentMessage,
    seen: list[SentMessage],
) -> None:
    """Alice's next message (the bot restarted, its flood window with it) is answered, and its memory
    takes none of the refused one in; nor did any prompt (chat, summary, memory): never heard."""
    later = await discord_world.say("Lilith, what's for lunch?", user=ALICE, channel=PLAIN_CHANNEL)
    assert len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == len(seen) + 1
    memories = await remembered(runtime.transfer, str(ALICE))
    sources = [i for m in memories for i in m["source_message_ids"]]
    assert str(later.id) in sources and str(refused.id) not in sources
    # Its words, not its ids: a random snowflake may hold the digits 4921.
    kept = [{k: v for k, v in m.items() if k not in ("id", "source_message_ids")} for m in memories]
    words = json.dumps(kept)
    assert "4921" not in words
    assert "4921" not in json.dumps(llm_server.requests)
    assert refused.id not in discord_world.reacted()
    assert (await runtime.memory.form_pending()).memories == 0  # nothing left for a later pass


async def test_a_refused_message_is_not_answered_after_a_restart_nor_remembered(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Noted."
    reply, refused, notice = await refused_after_an_answer(discord_world, start_bot, runtime, lilith)

    await discord_world.stop()
    await start_bot()  # READY: what was missed is read back

    await assert_not_answered(discord_world, runtime, refused, [reply, notice])
    await assert_not_remembered(discord_world, runtime, llm_server, refused, [reply, notice])


async def test_a_refused_message_is_not_answered_after_a_resume_nor_remembered(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Noted."
    reply, refused, notice = await refused_after_an_answer(discord_world, start_bot, runtime, lilith)

    await discord_world.reconnect()  # RESUMED: read back as well

    await assert_not_answered(discord_world, runtime, refused, [reply, notice])
    await discord_world.stop()
    await start_bot()
    await assert_not_remembered(discord_world, runtime, llm_server, refused, [reply, notice])
