"""`recall` and the memory commands while a chat is open: typed in the chat (`/recall QUERY`, `/memory
...`), they run the same commands on the chat's own runtime, whose index the chat holds."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from testkit.cli import llm_server_thread, run


def test_recall_and_memory_commands_run_inside_the_chat(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def chat_typing(text: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        return run(capsys, "chat", "--personality", "sage", "--user", "42")

    with llm_server_thread() as llm_server:
        llm_server.responder = lambda body: "Biscuit is a fine name."
        monkeypatch.setenv("CHAT_MODEL", "openai/test-chat")
        monkeypatch.setenv("CHAT_API_BASE", llm_server.base_url)
        assert run(capsys, "personality", "create", "Sage")[0] == 0
        code, _, err = chat_typing("My dog is called Biscuit.\n/quit\n")
        assert code == 0, err

        typed = "/recall what is my dog called\n/memory list\n/memory stats\n/memory show nonsense\n/memory\n"
        code, out, err = chat_typing(typed + "/quit\n")
    assert code == 0, err
    assert "what is my dog called\n  1. [" in out and "My dog is called Biscuit." in out  # /recall
    assert "Memories of user 42, newest first: 1 to 1 of 1." in out  # /memory list, for the chat's user
    assert "MODE        SUMMARIZER" in out  # /memory stats, which takes no --user
    assert "('nonsense' is not a memory id; `personae memory list` shows them)" in out
    assert "usage: personae memory" in out  # /memory alone: its help
    assert "Traceback" not in out + err and "index is busy" not in out + err
