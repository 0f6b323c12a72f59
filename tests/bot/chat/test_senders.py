"""How replies reach a channel, on the fake Discord: the bot's own messages with the personality's name
in bold (which is never stored), and in a thread through its parent's webhook, a reply answered again
part by part in place."""

from __future__ import annotations

from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import CHANNEL, PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.state import bind, rows

ALICE = 201
THREAD = 4001
PARAGRAPH = "The northern maps were drawn by monks who never saw the sea. " * 20


async def test_only_the_header_the_bot_put_is_left_out_of_the_stored_reply(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "**Plan:**\nWater the tomatoes"
    await fake_discord.say("Lilith, what's the plan?", channel=PLAIN_CHANNEL)
    [reply] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert reply.content == "**Lilith**\n**Plan:**\nWater the tomatoes"
    assert [m.content for m in await rows(runtime) if m.role == "assistant"] == [
        "**Plan:**\nWater the tomatoes"
    ]


async def test_a_long_plain_reply_keeps_its_header_within_the_limit(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "y" * 3990
    await fake_discord.say("Lilith, go on", channel=PLAIN_CHANNEL)
    parts = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert len(parts) == 3 and parts[0].content.startswith("**Lilith**\n")
    assert all(len(p.content) <= 2000 for p in parts)
    stored = [m.content for m in await rows(runtime) if m.role == "assistant"]
    assert "".join(stored) == "y" * 3990


async def test_in_a_thread_a_reply_is_answered_again_part_by_part_through_the_parents_webhook(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    await bind(runtime, lilith, CHANNEL)
    await fake_discord.add_thread(THREAD, parent_id=CHANNEL)
    llm_server.responder = lambda body: "\n\n".join([PARAGRAPH.strip()] * 3)
    await fake_discord.say("tell me everything", channel=THREAD)
    parts = fake_discord.sent_by_bot(THREAD)
    [hook] = fake_discord.webhooks.values()
    assert len(parts) >= 3 and {p.webhook_id for p in parts} == {hook.id} and hook.channel_id == CHANNEL
    # Shorter: the first part edited (the 🔄 on it), the others deleted, all in the thread.
    llm_server.responder = lambda body: "Short now."
    await fake_discord.click(parts[-1], user=ALICE)
    assert fake_discord.sent_by_bot(THREAD) == [parts[0]]
    assert parts[0].content == "Short now." and parts[0].buttons
    assert fake_discord.edits_of(parts[0].id) == [f"/webhooks/{hook.id}/{hook.token}/messages/{parts[0].id}"]
    # Longer: the first part edited without the 🔄, the rest sent after it, the 🔄 on the last.
    llm_server.responder = lambda body: "x" * 4500
    await fake_discord.click(parts[0], user=ALICE)
    now = fake_discord.sent_by_bot(THREAD)
    assert now[0] is parts[0] and len(now) == 3
    assert [bool(p.buttons) for p in now] == [False, False, True]
    assert all(p.webhook_id == hook.id and p.author["username"] == "Lilith" for p in now)
