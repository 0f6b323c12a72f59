"""`personae chat` at a terminal, as a person uses it: the real command in a pseudo-terminal, its models
over HTTP (testkit/llm_server.py), a summarizer that answers only when the test lets it."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.cli.app import build_parser
from bot.runtime import open_core, open_memory_services
from bot.settings import load_bot_settings
from memory.recall.embedders import Embedder
from models import Conversation, Memory, Message
from models.database import create_engine, create_sessionmaker
from testkit.cli import llm_server_thread, run
from testkit.llm_server import LLMTestServer, SummarizerModel, Trickle
from tests.test_chat_cli import environment

EXPECT_SECONDS = 120  # a bound against a hang, not a timing: the shared machine may be slow


class HeldSummarizer(LLMTestServer):
    """A summarizer whose answers wait until the test lets them go: memory formation is in progress
    for as long as the test needs."""

    def __init__(self) -> None:
        super().__init__(responder=SummarizerModel())
        self.release = asyncio.Event()
        self._asked = asyncio.Event()

    async def asked(self) -> None:
        """Once a summary is asked for (and held)."""
        await asyncio.wait_for(self._asked.wait(), EXPECT_SECONDS)

    async def _apply_script(self, request: Any) -> Any:
        self._asked.set()
        await self.release.wait()
        return await super()._apply_script(request)


class Terminal:
    """`personae ARGS` on a pseudo-terminal: what it prints, and lines typed into it."""

    def __init__(self, *args: str, env: dict[str, str], cwd: Path) -> None:
        import pty

        self._master, child = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            env=env | {"TERM": "xterm"},
            cwd=cwd,
            start_new_session=True,
        )
        os.close(child)
        self.output = ""
        self._seen = 0
        self._more = asyncio.Event()
        self._closed = False
        asyncio.get_running_loop().add_reader(self._master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except OSError:  # the command ended
            data = b""
        if not data:
            self._closed = True
            asyncio.get_running_loop().remove_reader(self._master)
        self.output += data.decode(errors="replace")
        self._more.set()

    async def expect(self, text: str) -> str:
        """Wait until `text` is printed after what was expected before; returns the output up to it."""

        async def found() -> str:
            while (at := self.output.find(text, self._seen)) < 0:
                if self._closed:
                    raise AssertionError(f"ended without printing {text!r}:\n{self.output}")
                self._more.clear()
                await self._more.wait()
            start, self._seen = self._seen, at + len(text)
            return self.output[start : self._seen]

        try:
            return await asyncio.wait_for(found(), EXPECT_SECONDS)
        except TimeoutError:
            raise AssertionError(f"never printed {text!r}:\n{self.output}") from None

    def type(self, line: str) -> None:
        os.write(self._master, line.encode() + b"\r")

    async def ended(self) -> int:
        code = await asyncio.wait_for(asyncio.to_thread(self.process.wait), EXPECT_SECONDS)
        while not self._closed:
            self._more.clear()
            await asyncio.wait_for(self._more.wait(), EXPECT_SECONDS)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._closed:
            asyncio.get_running_loop().remove_reader(self._master)
        os.close(self._master)


@pytest.fixture
async def summarizer() -> AsyncIterator[HeldSummarizer]:
    async with HeldSummarizer() as server:
        yield server


@pytest.fixture
def env(
    scratch_database_url: str, llm_server: LLMTestServer, summarizer: HeldSummarizer, tmp_path: Path
) -> dict[str, str]:
    llm_server.responder = lambda body: "Biscuit is a fine name."
    return environment(
        scratch_database_url,
        tmp_path,
        CHAT_MODEL="openai/test-chat",
        CHAT_API_BASE=llm_server.base_url,
        SUMMARIZER_MODEL="openai/test-summarizer",
        SUMMARIZER_API_BASE=summarizer.base_url,
        MIN_SUMMARIZE_TOKENS="0",
        LOG_LEVEL="DEBUG",
    )


def create_lilith(capsys: pytest.CaptureFixture[str], *options: str) -> None:
    """`personae personality create Lilith OPTIONS` in this process (what it stores is what a chat
    process then opens; creating it is no part of what these tests watch a process do)."""
    code, _, err = run(capsys, "personality", "create", "Lilith", *options)
    assert code == 0, err


@pytest.fixture
def lilith(env: dict[str, str], cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lilith in the chat's database (`env`'s, which `cli_env` gives this process too)."""
    assert env["DATABASE_URL"] == os.environ["DATABASE_URL"]
    create_lilith(capsys)


@pytest.fixture
def summarized_lilith(env: dict[str, str], cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lilith in the chat's database, her memories summarized by the model."""
    assert env["DATABASE_URL"] == os.environ["DATABASE_URL"]
    create_lilith(capsys, "--memory-mode", "summarized")


async def rows(database_url: str, model: Any) -> list[Any]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            return list((await session.scalars(select(model).order_by(model.id))).all())
    finally:
        await engine.dispose()


@pytest.mark.usefixtures("summarized_lilith")
async def test_the_next_prompt_never_waits_on_memory_formation(
    env: dict[str, str], summarizer: HeldSummarizer, tmp_path: Path
) -> None:
    chat = Terminal("chat", "--personality", "lilith", "--user", "42", env=env, cwd=tmp_path)
    try:
        banner = await chat.expect("you> ")
        log_file = tmp_path / "data" / "logs" / "chat.log"
        assert f"Logs: {log_file}" in banner
        chat.type("My dog is called Biscuit.")
        turn = await chat.expect("you> ")
        # The mark is on the screen before the reply's first word, then replaced by it.
        assert turn.index("Lilith> thinking…") < turn.index("Biscuit is a fine name.")
        # The next turn is answered while the summarizer holds the first exchange's memory.
        await summarizer.asked()
        chat.type("He is three years old.")
        assert "Biscuit is a fine name." in await chat.expect("you> ")
        assert summarizer.in_flight >= 1 and "(remembered)" not in chat.output
        chat.type("/quit")
        await chat.expect("finishing this chat's memories; Ctrl-C leaves them for the next time")
        assert chat.process.poll() is None  # /quit waits for formation
        summarizer.release.set()
        await chat.expect("(remembered)")
        assert await chat.ended() == 0
    finally:
        chat.close()
    memories = await rows(env["DATABASE_URL"], Memory)
    assert len(memories) == 2
    logged = log_file.read_text()
    assert "DEBUG" in logged and "DEBUG" not in chat.output  # logs went to the file, not the screen


@pytest.mark.usefixtures("summarized_lilith")
async def test_a_note_waits_for_the_end_of_the_reply_being_written(
    env: dict[str, str], llm_server: LLMTestServer, summarizer: HeldSummarizer, tmp_path: Path
) -> None:
    chat = Terminal("chat", "--personality", "lilith", "--user", "42", env=env, cwd=tmp_path)
    try:
        await chat.expect("you> ")
        chat.type("My dog is called Biscuit.")
        await chat.expect("you> ")
        await summarizer.asked()
        # The first memory is formed while the second reply comes a word at a time.
        llm_server.script(Trickle(interval=0.5))
        chat.type("He is three years old.")
        await chat.expect("Lilith> Biscuit")
        summarizer.release.set()
        turn = await chat.expect("you> ")
        chat.type("/quit")
        assert await chat.ended() == 0
    finally:
        chat.close()
    assert " is a fine name.\r\n" in turn  # the reply's line whole, whenever the note came
    assert "(remembered)" in chat.output[chat.output.index("He is three years old.") :]


@pytest.mark.usefixtures("summarized_lilith")
async def test_ctrl_c_leaves_formation_for_the_next_chat(
    env: dict[str, str],
    summarizer: HeldSummarizer,
    embedder: Embedder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat = Terminal("chat", "--personality", "lilith", "--user", "42", env=env, cwd=tmp_path)
    try:
        await chat.expect("you> ")
        chat.type("My dog is called Biscuit.")
        await chat.expect("you> ")
        chat.type("/quit")
        await chat.expect("Ctrl-C leaves them for the next time")
        chat.process.send_signal(signal.SIGINT)
        assert await chat.ended() == 130
    finally:
        chat.close()
    assert "Traceback" not in chat.output
    assert await rows(env["DATABASE_URL"], Memory) == []
    assert [m.role for m in await rows(env["DATABASE_URL"], Message)] == ["user", "assistant"]

    # The next chat, even in a new conversation, forms what the last one left. It runs in this
    # process (what it prints and stores is the point), on the database and the index the killed
    # process left: `personae chat` on the Runtime the command opens, lines typed on stdin.
    summarizer.release.set()
    for name in (
        "CHAT_MODEL",
        "CHAT_API_BASE",
        "SUMMARIZER_MODEL",
        "SUMMARIZER_API_BASE",
        "MIN_SUMMARIZE_TOKENS",
    ):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setattr("sys.stdin", io.StringIO("Good boy.\n/quit\n"))
    args = build_parser().parse_args(["chat", "--personality", "lilith", "--user", "42", "--new"])
    settings = load_bot_settings()
    assert (settings.database_url, settings.personae_data_dir) == (env["DATABASE_URL"], tmp_path / "data")
    async with open_core(settings) as core, open_memory_services(core, embedder=embedder) as runtime:
        await args.handler(args, runtime)
    assert "(remembered)" in capsys.readouterr().out
    assert len(await rows(env["DATABASE_URL"], Memory)) == 2
    assert len(await rows(env["DATABASE_URL"], Conversation)) == 2


def card(tmp_path: Path) -> Path:
    path = tmp_path / "seren.json"
    data = {
        "name": "Seren",
        "description": "{{char}} keeps the lighthouse.",
        "personality": "patient",
        "scenario": "",
        "first_mes": "Welcome to the lighthouse, {{user}}.",
        "alternate_greetings": [],
        "mes_example": "",
    }
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}))
    return path


def test_a_new_conversation_opens_with_the_greeting_and_none_of_the_old_one(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process (what is printed, sent and stored, nothing a terminal changes), lines typed on stdin."""
    tmp_path = cli_env

    def chat(typed: str, *args: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(typed))
        return run(capsys, "chat", "--personality", "seren", "--user", "42", *args)

    with llm_server_thread() as llm_server, llm_server_thread(responder=SummarizerModel()) as summarizer:
        llm_server.responder = lambda body: "Biscuit is a fine name."
        for name, value in {
            "CHAT_MODEL": "openai/test-chat",
            "CHAT_API_BASE": llm_server.base_url,
            "SUMMARIZER_MODEL": "openai/test-summarizer",
            "SUMMARIZER_API_BASE": summarizer.base_url,
            "MIN_SUMMARIZE_TOKENS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        code, _, err = run(capsys, "personality", "import", str(card(tmp_path)))
        assert code == 0, err
        code, out, err = chat("My dog is called Biscuit.\n", "--name", "Robin")
        assert code == 0, err
        assert "Seren> Welcome to the lighthouse, Robin." in out
        # The name given is what the model sees, from the first turn on.
        first = llm_server.requests[-1]["messages"]
        assert "Robin" in first[0]["content"]

        code, out, err = chat("And my cat?\n")
        assert code == 0, err
        assert "Welcome to the lighthouse" not in out  # the same conversation goes on
        assert "Biscuit" in json.dumps(llm_server.requests[-1]["messages"])

        code, out, err = chat("And Sam is me.\n", "--new", "--name", "Sam")
        assert code == 0, err
        assert "Seren> Welcome to the lighthouse, Sam." in out
        sent = llm_server.requests[-1]["messages"]
    # No earlier message in its history (its long-term memories may still be recalled into the system
    # message: they stay).
    assert [m["content"] for m in sent[1:]] == ["Welcome to the lighthouse, Sam.", "And Sam is me."]
    # The old conversation stays in the log, set aside.
    assert len(asyncio.run(rows(scratch_database_url, Conversation))) == 2
    assert "And my cat?" in [m.content for m in asyncio.run(rows(scratch_database_url, Message))]


@pytest.mark.usefixtures("lilith")
async def test_reports_on_postgresql_run_while_the_chat_holds_the_index(
    env: dict[str, str], summarizer: HeldSummarizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chat is a process holding the index; the reports run beside it in this one (`cli_env`'s
    environment is the chat's), in a thread, as `main()` runs an event loop of its own."""
    summarizer.release.set()
    chat = Terminal("chat", "--personality", "lilith", "--user", "42", env=env, cwd=tmp_path)
    try:
        await chat.expect("you> ")
        chat.type("My dog is called Biscuit.")
        await chat.expect("(remembered)")
        for command in (("memory", "stats"), ("memory", "list", "--personality", "lilith", "--user", "42")):
            code, out, err = await asyncio.to_thread(run, capsys, *command)
            assert code == 0, err
        chat.type("/quit")
        assert await chat.ended() == 0
    finally:
        chat.close()
    assert "Biscuit" in out  # the memory formed while the chat ran, listed from PostgreSQL
