"""A message typed or pasted into `personae chat` is held to Discord's bound (2,000 characters), as
Discord's client holds it: past it, one line says so, and nothing is sent to the model or stored."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from sqlalchemy import select

from models import Message
from models.database import create_engine, create_sessionmaker
from testkit.cli import llm_server_thread, run

REFUSED = "(not sent: your message is 2,001 characters, and a message is at most 2,000, as on Discord;"


def test_a_message_over_discords_bound_is_refused_in_one_line(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at_bound, over = "a" * 2000, "b" * 2001
    with llm_server_thread() as llm_server:
        llm_server.responder = lambda body: "Noted."
        monkeypatch.setenv("CHAT_MODEL", "openai/test-chat")
        monkeypatch.setenv("CHAT_API_BASE", llm_server.base_url)
        assert run(capsys, "personality", "create", "Sage")[0] == 0
        monkeypatch.setattr("sys.stdin", io.StringIO(f"{at_bound}\n{over}\n/edit {over}\n/quit\n"))
        code, out, err = run(capsys, "chat", "--personality", "sage", "--user", "42")
    assert code == 0, err
    assert out.count(REFUSED) == 2, out  # the message, and the last one edited to it
    assert "Sage> Noted." in out
    [answered] = llm_server.requests
    assert answered["messages"][-1]["content"] == at_bound
    assert asyncio.run(stored_contents(scratch_database_url)) == [at_bound, "Noted."]


async def stored_contents(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            return list((await session.scalars(select(Message.content).order_by(Message.id))).all())
    finally:
        await engine.dispose()
