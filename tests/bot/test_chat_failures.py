"""What goes wrong around a chat turn, through the chat cog on dpytest with the real services: a failed
typing indicator, a database error, a personality deleted while cached, a reply that begins in bold."""

from __future__ import annotations

from typing import Any
from unittest.mock import AsyncMock

import aiohttp
import discord.ext.test as dpytest
import pytest
from sqlalchemy import delete
from sqlalchemy.exc import OperationalError

from bot.chat.cog import FAILURE_NOTICE, ChatCog
from bot.client import PersonaeBot
from models import Personality
from testkit.llm_server import LLMTestServer
from tests.bot.chatting import rows, say, sent_messages
from tests.bot.test_senders import fake_webhook
from tests.memory.chat.memories import remembered


async def test_a_failed_typing_indicator_loses_nothing(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Tomatoes love the sun."
    bot.http.add_reaction = AsyncMock()  # type: ignore[method-assign]
    bot.http.send_typing = AsyncMock(  # type: ignore[method-assign]
        side_effect=aiohttp.ClientConnectionError("connection dropped")
    )
    message = await say("Lilith, where should the tomatoes go?", channel=0)
    [reply] = sent_messages()
    assert reply.content == "**Lilith**\nTomatoes love the sun."
    assert [(m.role, m.content) for m in await rows(runtime)] == [
        ("user", "Lilith, where should the tomatoes go?"),
        ("assistant", "Tomatoes love the sun."),
    ]
    memories = await remembered(runtime.user_settings, str(message.author.id))
    assert [m["source_message_ids"][0] for m in memories] == [str(message.id)]
    bot.http.add_reaction.assert_awaited_once_with(message.channel.id, message.id, "📝")


async def test_a_database_error_after_storing_is_a_short_notice(
    bot: PersonaeBot,
    cog: ChatCog,
    runtime: Any,
    lilith: Personality,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lost = OperationalError("SELECT messages", {}, ConnectionResetError("connection lost"))
    monkeypatch.setattr(cog.chat, "_build_prompt", AsyncMock(side_effect=lost))
    await say("Lilith, remember the seeds.", channel=0)
    [notice] = sent_messages()
    assert notice.content == FAILURE_NOTICE
    assert "Traceback" not in notice.content and "SELECT" not in notice.content
    # Stored before the failure: the message is in the log, to be answered in memory later.
    assert [(m.role, m.content) for m in await rows(runtime)] == [("user", "Lilith, remember the seeds.")]
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)


async def test_a_personality_deleted_while_cached_gets_a_notice(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, caplog: pytest.LogCaptureFixture
) -> None:
    await say("Lilith, hello", channel=0)
    assert len(sent_messages()) == 1  # the routing directory now holds Lilith's names
    # Deleted by another process (the command line): this one's routing cache still knows her.
    async with runtime.sessionmaker.begin() as session:
        await session.execute(delete(Personality).where(Personality.id == lilith.id))
    await say("Lilith, are you still there?", channel=0)
    [notice] = sent_messages()
    assert notice.content == FAILURE_NOTICE
    assert any(r.levelname == "ERROR" for r in caplog.records)
    # The cache was emptied: the next message addresses nobody and gets no answer.
    await say("Lilith, hello?", channel=0)
    assert sent_messages() == []


async def test_a_webhook_reply_that_begins_in_bold_is_stored_whole(
    bot: PersonaeBot, cog: ChatCog, runtime: Any, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "**Plan:**\nWater the tomatoes"
    channel = dpytest.get_config().channels[0]
    await dpytest.set_permission_overrides(channel.guild.default_role, channel, manage_webhooks=True)
    webhook = fake_webhook([])
    sender = cog.senders.webhook
    assert type(sender).__name__ == "WebhookSender"
    sender._webhooks[channel.id] = webhook
    await say("Lilith, what's the plan?", channel=channel)
    webhook.send.assert_awaited_once()
    assert [m.content for m in await rows(runtime) if m.role == "assistant"] == [
        "**Plan:**\nWater the tomatoes"
    ]
