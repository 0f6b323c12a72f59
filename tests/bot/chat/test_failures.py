"""What goes wrong around a chat turn, on the fake Discord with the real services: Discord refusing the
typing indicator or the webhook, a database error, a personality deleted while cached, a reply that
begins in bold."""

from __future__ import annotations

from unittest.mock import AsyncMock

import pytest
from sqlalchemy import delete
from sqlalchemy.exc import OperationalError

from bot.chat.answering import FAILURE_NOTICE
from bot.runtime import Runtime
from memory.chat.service import CUT_REPLY, REPLY_CUT_NOTE
from models import Personality
from testkit.fake_discord import CHANNEL, PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer, Trickle
from tests.bot.state import rows
from tests.memory.chat.memories import remembered

ALICE = 201


async def test_a_refused_typing_indicator_loses_nothing(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Tomatoes love the sun."
    fake_discord.fail("POST", f"/channels/{PLAIN_CHANNEL}/typing", 403)
    said = await fake_discord.say("Lilith, where should the tomatoes go?", channel=PLAIN_CHANNEL)
    [reply] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert reply.content == "**Lilith**\nTomatoes love the sun."
    assert [(m.role, m.content) for m in await rows(runtime)] == [
        ("user", "Lilith, where should the tomatoes go?"),
        ("assistant", "Tomatoes love the sun."),
    ]
    memories = await remembered(runtime.transfer, str(ALICE))
    assert [m["source_message_ids"][0] for m in memories] == [str(said.id)]
    assert fake_discord.reacted() == {said.id}


async def test_a_refused_webhook_answers_as_the_bot(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Still here."
    fake_discord.fail("POST", f"/channels/{CHANNEL}/webhooks", 403, 50013)
    await fake_discord.say("Lilith, hello?")
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    assert reply.webhook_id is None and reply.content == "**Lilith**\nStill here."
    assert [m.content for m in await rows(runtime) if m.role == "assistant"] == ["Still here."]


async def test_any_refusal_of_the_webhook_answers_as_the_bot(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """Discord refuses a webhook message with 400 when its name holds "clyde" or "discord", among other
    reasons: the reply comes as the bot's own message all the same (issue 20, 19)."""
    llm_server.responder = lambda body: "Still here."
    await fake_discord.say("Lilith, one")  # the webhook exists
    fake_discord.fail("POST", r"/webhooks/\d+/[^/]+", 400, 50035, "Invalid Form Body")
    said = await fake_discord.say("Lilith, two")
    reply = fake_discord.sent_by_bot(CHANNEL)[-1]
    assert reply.webhook_id is None and reply.content == "**Lilith**\nStill here."
    assert [m.content for m in await rows(runtime) if m.role == "assistant"] == ["Still here.", "Still here."]
    assert said.id in fake_discord.reacted()


async def test_a_reply_longer_than_the_cap_is_cut_and_says_so(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """A model that ignores max_tokens (200,000 characters) posts at most REPLY_MAX_CHARS, and the reply
    says it was cut; what was posted is what is stored and remembered (issue 20, 20)."""
    llm_server.responder = lambda body: " ".join(f"word{i}" for i in range(20_000))
    cap = runtime.settings.reply_max_chars
    said = await fake_discord.say("Lilith, tell me everything.", channel=PLAIN_CHANNEL)
    parts = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    text = "".join(p.content for p in parts).removeprefix("**Lilith**\n")
    assert len(parts) <= cap // 1000 and len(text) <= cap  # unbounded, 200,000 characters were 100 messages
    assert text.startswith("word0 word1 ") and text.endswith(REPLY_CUT_NOTE.format(limit=cap).strip())
    stored = "".join(m.content for m in await rows(runtime) if m.role == "assistant")
    assert stored == text
    assert said.id in fake_discord.reacted()


async def test_a_stream_cut_at_its_deadline_is_told_in_the_channel(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    """The model sends a word, then nothing for longer than its idle deadline: the partial answer is not
    posted as if it were whole, the user reads that it was cut, and the message waits to be answered
    (issue 20, 8)."""
    llm_server.responder = lambda body: "Once upon a time"
    llm_server.script(Trickle(interval=30))
    said = await fake_discord.say("Lilith, a story please.", channel=PLAIN_CHANNEL)
    [notice] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert notice.content == "**Lilith**\n" + CUT_REPLY
    assert [(m.role, m.content) for m in await rows(runtime)] == [("user", "Lilith, a story please.")]
    assert said.id not in fake_discord.reacted()


async def test_a_webhook_deleted_by_someone_is_made_again(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Hello."
    await fake_discord.say("Lilith, one")
    [hook] = fake_discord.webhooks.values()
    del fake_discord.webhooks[hook.token]  # a moderator deleted it
    fake_discord.fail("POST", f"/webhooks/{hook.id}/{hook.token}", 404, 10015, "Unknown Webhook")
    await fake_discord.say("Lilith, two")
    [new_hook] = fake_discord.webhooks.values()
    assert new_hook.id != hook.id
    assert [m.webhook_id for m in fake_discord.sent_by_bot(CHANNEL)] == [new_hook.id]


async def test_a_database_error_after_storing_is_a_short_notice(
    fake_discord: FakeDiscord,
    runtime: Runtime,
    lilith: Personality,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The connection lost right after the message was stored (a fault no test database gives on demand).
    lost = OperationalError("SELECT messages", {}, ConnectionResetError("connection lost"))
    monkeypatch.setattr(runtime.chat, "_build_prompt", AsyncMock(side_effect=lost))
    await fake_discord.say("Lilith, remember the seeds.", channel=PLAIN_CHANNEL)
    [notice] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert notice.content == FAILURE_NOTICE
    assert "Traceback" not in notice.content and "SELECT" not in notice.content
    # Stored before the failure: the message is in the log, to be answered in memory later.
    assert [(m.role, m.content) for m in await rows(runtime)] == [("user", "Lilith, remember the seeds.")]
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)


async def test_a_personality_deleted_while_cached_gets_a_notice(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, caplog: pytest.LogCaptureFixture
) -> None:
    await fake_discord.say("Lilith, hello", channel=PLAIN_CHANNEL)
    assert len(fake_discord.sent_by_bot(PLAIN_CHANNEL)) == 1  # the routing directory holds Lilith's names
    # Deleted by another process (the command line): this one's routing cache still knows her.
    async with runtime.sessionmaker.begin() as session:
        await session.execute(delete(Personality).where(Personality.id == lilith.id))
    await fake_discord.say("Lilith, are you still there?", channel=PLAIN_CHANNEL)
    notice = fake_discord.sent_by_bot(PLAIN_CHANNEL)[-1]
    assert notice.content == FAILURE_NOTICE
    assert any(r.levelname == "ERROR" for r in caplog.records)
    # The cache was emptied: the next message addresses nobody and gets no answer.
    await fake_discord.say("Lilith, hello?", channel=PLAIN_CHANNEL)
    assert fake_discord.sent_by_bot(PLAIN_CHANNEL)[-1] is notice


async def test_a_webhook_reply_that_begins_in_bold_is_stored_whole(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "**Plan:**\nWater the tomatoes"
    await fake_discord.say("Lilith, what's the plan?")
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    assert reply.webhook_id is not None and reply.content == "**Plan:**\nWater the tomatoes"
    assert [m.content for m in await rows(runtime) if m.role == "assistant"] == [
        "**Plan:**\nWater the tomatoes"
    ]
