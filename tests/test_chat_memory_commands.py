"""`recall` and the memory commands while a chat is open: typed in the chat (`/recall QUERY`, `/memory
...`), they run the same commands on the chat's own runtime, whose index the chat holds."""

from __future__ import annotations

from pathlib import Path

from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae


async def test_recall_and_memory_commands_run_inside_the_chat(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: "Biscuit is a fine name."
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    chat = ("chat", "--personality", "sage", "--user", "42")
    code, _, err = await personae(*chat, env=env, cwd=tmp_path, stdin=b"My dog is called Biscuit.\n/quit\n")
    assert code == 0, err

    typed = b"/recall what is my dog called\n/memory list\n/memory stats\n/memory show nonsense\n/memory\n"
    code, out, err = await personae(*chat, env=env, cwd=tmp_path, stdin=typed + b"/quit\n")
    assert code == 0, err
    assert "what is my dog called\n  1. [" in out and "My dog is called Biscuit." in out  # /recall
    assert "Memories of user 42, newest first: 1 to 1 of 1." in out  # /memory list, for the chat's user
    assert "MODE        SUMMARIZER" in out  # /memory stats, which takes no --user
    assert "('nonsense' is not a memory id; `personae memory list` shows them)" in out
    assert "usage: personae memory" in out  # /memory alone: its help
    assert "Traceback" not in out + err and "index is busy" not in out + err
