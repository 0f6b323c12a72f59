"""`personae recall` and `personae memory search` while a chat holds the embedded index: refused in one
line that names the chat holding it and where the command runs instead (/recall, /memory in it)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae


async def test_recall_elsewhere_names_the_chat_that_holds_the_index(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    chat = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot.cli", "chat", "--personality", "sage", "--user", "42"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    try:
        assert b"Chatting with Sage" in await asyncio.wait_for(chat.stdout.readline(), timeout=120)
        for command in (("recall", "my dog", "--personality", "sage"), ("memory", "search", "my dog")):
            code, out, err = await personae(*command, "--user", "42", env=env, cwd=tmp_path)
            assert code == 1 and not out
            assert err.count("\n") == 1, err
            assert f"(pid {chat.pid}: `personae chat --personality sage --user 42`)" in err, err
            assert "run the command in that one (/recall and /memory in that chat)" in err, err
    finally:
        chat.stdin.write(b"/quit\n")
        chat.stdin.close()
        await asyncio.wait_for(chat.wait(), timeout=120)
