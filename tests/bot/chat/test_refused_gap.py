"""Issue 33, item 4's edge: a refused message marks nothing as read but itself. Bob's message lost in a
gateway gap (in the channel's history, no event), then Alice's next message refused by the flood limit
(stored, as refused, with a later id): catch-up used to read on after the newest stored message, the
refused one, and Bob was never answered nor remembered. It reads on after the newest message the bot
acted on, passing the refused one over."""

from __future__ import annotations

from datetime import timedelta

from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.state import StartBot, bind, rows
from tests.memory.chat.memories import remembered

ALICE, BOB = 201, 202


async def test_a_message_missed_before_a_refused_one_is_still_read_back(
    discord_world: FakeDiscord,
    start_bot: StartBot,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = lambda body: "Noted."
    await bind(runtime, lilith, PLAIN_CHANNEL)
    await start_bot(cooldown_messages=1, cooldown_seconds=60)
    await discord_world.say("Lilith, good morning.", user=ALICE, channel=PLAIN_CHANNEL)
    missed = discord_world.said_while_away(
        "Lilith, my train leaves at nine.", user=BOB, channel=PLAIN_CHANNEL, ago=timedelta(0)
    )
    refused = await discord_world.say("Lilith, the door code is 4921.", user=ALICE, channel=PLAIN_CHANNEL)
    reply, notice = discord_world.sent_by_bot(PLAIN_CHANNEL)
    assert "you're sending messages a little fast" in notice.content
    assert reply.id < missed.id < refused.id  # acted on, missed, refused: in that order

    await discord_world.reconnect()  # RESUMED: what was missed is read back

    assert len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == 3  # Bob answered, the refused one not
    stored = {m.external_id: m.memory_excluded for m in await rows(runtime)}
    assert str(missed.id) in stored and stored[str(missed.id)] is None
    assert stored[str(refused.id)] == "refused"
    bobs = await remembered(runtime.transfer, str(BOB))
    assert str(missed.id) in [i for m in bobs for i in m["source_message_ids"]]

    # Read again (a restart): nothing stored twice, nothing answered twice.
    await discord_world.stop()
    await start_bot()
    assert len(discord_world.sent_by_bot(PLAIN_CHANNEL)) == 3
    assert len(await rows(runtime)) == len(stored)
