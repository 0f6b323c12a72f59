"""`personae chat`: in-process on the bot's runtime, and as a user runs it (`main()`), both talking to
the OpenAI-compatible test server. `personae` and `environment` run it as a real subprocess, for the
tests of what only a process shows (tests/test_chat_terminal.py and others)."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
from pathlib import Path

import pytest
from sqlalchemy import any_, literal, select

from bot.cli.chat import cmd_chat
from bot.cli.output import CommandError
from bot.runtime import Runtime
from models import Memory, Message
from models.database import create_engine, create_sessionmaker
from testkit.cli import llm_server_thread, run
from testkit.llm_server import LLMTestServer
from tests.memory.chat.memories import remembered


async def personae(*args: str, env: dict[str, str], cwd: Path, stdin: bytes = b"") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), timeout=180)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def environment(database_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAT_", "SUMMARIZER_", "DATABASE_"))}
    env.update(DATABASE_URL=database_url, PERSONAE_DATA_DIR=str(tmp_path / "data"), **extra)
    return env


def use_chat_model(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    """The test chat model at `base_url`, for commands run in this process."""
    for name, value in {
        "CHAT_MODEL": "openai/test-chat",
        "CHAT_API_BASE": base_url,
        "CHAT_API_KEY": "test",
    }.items():
        monkeypatch.setenv(name, value)


def test_terminal_chat_is_stored_like_discord(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`personae chat` as a user runs it, in-process (what it prints, sends and stores: nothing a
    process shows), lines typed on stdin."""
    tmp_path = cli_env
    with llm_server_thread() as llm_server:
        llm_server.responder = lambda body: "Biscuit is a fine name. *adjusts glasses*"
        use_chat_model(monkeypatch, llm_server.base_url)
        code, _, err = run(capsys, "personality", "create", "Lilith")
        assert code == 0, err
        monkeypatch.setattr("sys.stdin", io.StringIO("My dog is called Biscuit\n/quit\n"))
        code, out, err = run(capsys, "chat", "--personality", "lilith", "--user", "42")
        sent = llm_server.requests[-1]["messages"]
    assert code == 0, err
    assert "Chatting with Lilith" in out
    assert "Biscuit is a fine name." in out
    assert f"Logs: {tmp_path / 'data' / 'logs' / 'chat.log'}" in out
    assert sent[0]["role"] == "system" and "Lilith" in sent[0]["content"]
    assert sent[-1]["role"] == "user" and "My dog is called Biscuit" in sent[-1]["content"]
    rows = asyncio.run(messages(scratch_database_url))
    assert [m.role for m in rows] == ["user", "assistant"]
    assert (rows[0].author_id, rows[0].content) == ("42", "My dog is called Biscuit")
    assert rows[1].content.startswith("Biscuit is a fine name.")


async def messages(database_url: str) -> list[Message]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            return list((await session.scalars(select(Message).order_by(Message.id))).all())
    finally:
        await engine.dispose()


def test_terminal_chat_without_model_names_the_variable(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(capsys, "personality", "create", "Lilith")
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    code, _, err = run(capsys, "chat", "--personality", "lilith")
    assert code == 1
    assert "CHAT_MODEL" in err and "Traceback" not in err


def test_why_shows_the_memories_the_last_reply_used_with_their_ids(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tmp_path = cli_env
    with llm_server_thread() as llm_server:
        use_chat_model(monkeypatch, llm_server.base_url)
        assert run(capsys, "personality", "create", "Lilith")[0] == 0
        said = [
            ("b1", "user", "My dog is called Biscuit and she loves the beach."),
            ("b2", "assistant", "Biscuit sounds like a happy dog."),
        ]
        chat_file = tmp_path / "before.jsonl"
        chat_file.write_text(
            "".join(
                json.dumps(
                    {"id": i, "role": role, "content": text, "user_id": "42" if role == "user" else None}
                )
                + "\n"
                for i, role, text in said
            )
        )
        code, _, err = run(capsys, "import", str(chat_file), "--personality", "lilith")
        assert code == 0, err
        llm_server.responder = lambda body: "Biscuit, and she loves the beach."
        monkeypatch.setattr("sys.stdin", io.StringIO("/why\nWhat is my dog called?\n/why\n/quit\n"))
        # --new: a conversation whose history does not show the imported exchange (recalled then)
        code, out, err = run(capsys, "chat", "--personality", "lilith", "--user", "42", "--new")
    assert code == 0, err
    memory, reply = asyncio.run(memory_and_last_reply(scratch_database_url))
    # Before any reply, nothing to show; after it, the memory its prompt held, by id.
    assert "(no reply yet" in out
    assert "The last reply used 1 memory:" in out
    row = next(line for line in out.splitlines() if line.startswith(str(memory.id)[:8] + " "))
    assert "#1" in row and "Biscuit" in row
    # The same receipt from the command line, by the reply's id.
    code, out, err = run(capsys, "memory", "used", str(reply), "--user", "42")
    assert code == 0, err
    assert out.splitlines()[0].endswith("used 1 memory:") and f"\n{str(memory.id)[:8]} " in out


async def memory_and_last_reply(database_url: str) -> tuple[Memory, str | None]:
    """The memory of the imported exchange (b1) and the external id of the chat's last reply."""
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            [memory] = (
                await session.scalars(select(Memory).where(literal("b1") == any_(Memory.source_message_ids)))
            ).all()
            reply = await session.scalar(
                select(Message.external_id)
                .where(Message.role == "assistant")
                .order_by(Message.id.desc())
                .limit(1)
            )
    finally:
        await engine.dispose()
    return memory, reply


async def test_terminal_chat_streams_stores_and_remembers(
    runtime: Runtime,
    llm_server: LLMTestServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await runtime.personalities.create("Lilith", prompt="You are Lilith, a librarian.")
    llm_server.responder = lambda body: "Biscuit is a fine name."
    monkeypatch.setattr("sys.stdin", io.StringIO("My dog is called Biscuit.\n/reset\n/quit\n"))
    args = argparse.Namespace(personality="lilith", user="42", name="Sam", new=False)
    await cmd_chat(args, runtime)
    out = capsys.readouterr().out
    assert "Lilith> Biscuit is a fine name." in out
    assert "conversation summary cleared" in out
    memories = await remembered(runtime.transfer, "42")
    assert [m["content"] for m in memories] == [
        "Sam: My dog is called Biscuit.\nLilith: Biscuit is a fine name."
    ]


async def test_terminal_chat_without_a_model_names_the_variable(runtime_without_chat_model: Runtime) -> None:
    await runtime_without_chat_model.personalities.create("Lilith")
    args = argparse.Namespace(personality="lilith", user="1", name="Sam", new=False)
    with pytest.raises(CommandError, match="CHAT_MODEL"):
        await cmd_chat(args, runtime_without_chat_model)
