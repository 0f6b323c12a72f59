"""`personae recall` and `personae memory ...` while a chat holds the embedded index: the chat answers
them for the other process (bot.cli.index_holder), with the very output and exit code they give when
nothing holds the index; a holder gone leaves its socket behind and the command runs alone again; a
holder that stops before answering is one line."""

from __future__ import annotations

import asyncio
import stat
import sys
from pathlib import Path

from bot.cli.index_client import command_socket, reachable_path
from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae

COMMANDS = (
    ("recall", "what is my dog called", "--personality", "sage", "--user", "42"),
    ("memory", "search", "my dog", "--user", "42"),
    ("memory", "show", "nonsense", "--user", "42"),  # refused: one line, exit 1, wherever it runs
)


async def _run_all(env: dict[str, str], cwd: Path) -> list[tuple[int, str, str]]:
    return [await personae(*command, env=env, cwd=cwd) for command in COMMANDS]


async def test_the_chat_holding_the_index_answers_recall_and_memory_commands_as_they_answer_alone(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: "Biscuit is a fine name."
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    # The memory the commands find: imported (a chat process of its own would only cost start-up).
    transcript = tmp_path / "said.jsonl"
    transcript.write_text(
        '{"id": "1", "role": "user", "content": "My dog is called Biscuit.", "user_id": "42"}\n'
        '{"id": "2", "role": "assistant", "content": "Biscuit is a fine name.", "reply_to": "1"}\n'
    )
    code, _, err = await personae("import", str(transcript), "--personality", "sage", env=env, cwd=tmp_path)
    assert code == 0, err
    chat_command = ("chat", "--personality", "sage", "--user", "42")

    alone = await _run_all(env, tmp_path)
    assert alone[0][0] == 0 and "My dog is called Biscuit." in alone[0][1], alone[0]
    assert alone[1][0] == 0 and "My dog is called Biscuit." in alone[1][1], alone[1]
    assert alone[2][0] == 1 and alone[2][2].count("\n") == 1, alone[2]

    chat = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot.cli", *chat_command),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    socket_path = command_socket(tmp_path / "data")
    try:
        assert b"Chatting with Sage" in await asyncio.wait_for(chat.stdout.readline(), timeout=120)
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600  # this user's processes only
        assert await _run_all(env, tmp_path) == alone
    finally:
        chat.kill()  # gone without closing anything: its socket stays behind, nobody listening on it
        await chat.wait()
    assert socket_path.exists()
    # Nobody answers on the socket left behind: the command runs alone (one of them shows it).
    assert await personae(*COMMANDS[0], env=env, cwd=tmp_path) == alone[0]

    # A worker holds the index as long: it answers them too, from the moment its socket is there.
    socket_path.unlink()  # the one left behind (a worker replaces it, but would not be told apart)
    worker = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot.cli", "worker"), stderr=asyncio.subprocess.DEVNULL, env=env, cwd=tmp_path
    )
    try:
        async with asyncio.timeout(120):
            while not socket_path.exists():  # noqa: ASYNC110 (a file to wait for: nothing to await)
                await asyncio.sleep(0.1)
        assert await personae(*COMMANDS[1], env=env, cwd=tmp_path) == alone[1]
    finally:
        worker.terminate()  # SIGTERM: the worker stops in order, its socket removed
        await worker.wait()
    assert not socket_path.exists()


async def test_a_holder_that_stops_before_answering_is_one_line(
    scratch_database_url: str, tmp_path: Path
) -> None:
    env = environment(scratch_database_url, tmp_path)
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    socket_path = command_socket(tmp_path / "data")
    socket_path.parent.mkdir(parents=True)
    asked: list[bytes] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readline())
        writer.close()

    with reachable_path(socket_path) as where:
        server = await asyncio.start_unix_server(hang_up, path=where)
    async with server:
        code, out, err = await personae(*COMMANDS[0], env=env, cwd=tmp_path)
    assert b'"argv": ["recall", "what is my dog called"' in asked[0]
    assert (code, out) == (1, "")
    assert err.startswith("personae: The process holding the vector index (pid ") and err.count("\n") == 1, (
        err
    )
    assert "stopped before answering; run the command again." in err
