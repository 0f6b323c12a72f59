"""The bot's start makes a reply's path once before it connects (bot.client.warm_up_replies, through
ChatService.warm_up): a user message stored, a prompt built, the index searched, all taken back, so
the first message or interaction after a start waits on no compiling, connecting or model loading."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import event, func, select

from bot.runtime import Runtime
from models import Message, Personality
from tests.bot.state import StartBot


async def test_the_start_prepares_a_reply_once_and_keeps_nothing(
    start_bot: StartBot, runtime: Runtime, sage: Personality, caplog: pytest.LogCaptureFixture
) -> None:
    executed: list[str] = []

    def seen(*arguments: Any) -> None:  # before_cursor_execute: (conn, cursor, statement, ...)
        executed.append(" ".join(str(arguments[2]).split()))

    engine = runtime.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with caplog.at_level(logging.WARNING, logger="memory.chat.service"):
            bot = await start_bot()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert bot.is_ready()
    assert any(statement.startswith("INSERT INTO messages") for statement in executed), executed
    assert "Warming up the reply path failed" not in caplog.text
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(Message)) == 0  # taken back


async def test_a_start_with_no_personality_has_nothing_to_warm(start_bot: StartBot, runtime: Runtime) -> None:
    bot = await start_bot()
    assert bot.is_ready()
