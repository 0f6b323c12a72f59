"""A message typed or pasted into `personae chat` is held to Discord's bound (2,000 characters), as
Discord's client holds it: past it, one line says so, and nothing is sent to the model or stored."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from models import Message
from models.database import create_engine, create_sessionmaker
from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae

REFUSED = "(not sent: your message is 2,001 characters, and a message is at most 2,000, as on Discord;"


async def test_a_message_over_discords_bound_is_refused_in_one_line(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: "Noted."
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    at_bound, over = "a" * 2000, "b" * 2001
    typed = f"{at_bound}\n{over}\n/edit {over}\n/quit\n".encode()
    code, out, err = await personae(
        "chat", "--personality", "sage", "--user", "42", env=env, cwd=tmp_path, stdin=typed
    )
    assert code == 0, err
    assert out.count(REFUSED) == 2, out  # the message, and the last one edited to it
    assert "Sage> Noted." in out
    [answered] = llm_server.requests
    assert answered["messages"][-1]["content"] == at_bound
    engine = create_engine(scratch_database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            stored = (await session.scalars(select(Message.content).order_by(Message.id))).all()
    finally:
        await engine.dispose()
    assert stored == [at_bound, "Noted."]
