"""A card's `{{user}}` is the name the user chats under, filled when the prompt is built (not fixed as
"User" at import): the terminal's --name, then their persona once they set one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from testkit.cli import llm_server_thread, run


def card(tmp_path: Path) -> Path:
    path = tmp_path / "seren.json"
    data = {
        "name": "Seren",
        "description": "{{char}} keeps the lighthouse and writes letters to <USER>.",
        "personality": "patient",
        "scenario": "{{user}} visits at dusk.",
        "first_mes": "Welcome, {{user}}.",
        "alternate_greetings": [],
        "mes_example": "<START>\n{{user}}: Is the lamp lit?\n{{char}}: Always, {{user}}.",
    }
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}))
    return path


def test_a_cards_user_is_the_name_the_user_chats_under(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = cli_env

    def chat_typing(text: str, *args: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        return run(capsys, "chat", "--personality", "seren", "--user", "42", *args)

    with llm_server_thread() as llm_server:
        llm_server.responder = lambda body: "The lamp is lit."
        monkeypatch.setenv("CHAT_MODEL", "openai/test-chat")
        monkeypatch.setenv("CHAT_API_BASE", llm_server.base_url)
        code, out, err = run(capsys, "personality", "import", str(card(tmp_path)))
        assert code == 0, err
        code, out, err = run(capsys, "personality", "show", "seren")
        assert "writes letters to {{user}}" in out and "the user" not in out  # kept for each chat to fill

        code, out, err = chat_typing("Hello.\n", "--name", "Robin")
        assert code == 0, err
        system = llm_server.requests[-1]["messages"][0]["content"]
        assert "Seren keeps the lighthouse and writes letters to Robin." in system
        assert "Scenario: Robin visits at dusk." in system
        assert "Robin: Is the lamp lit?\nSeren: Always, Robin." in system
        assert "{{user}}" not in system and "the user" not in system

        code, _, err = run(capsys, "persona", "set", "Captain Ana", "--user", "42")
        assert code == 0, err
        code, out, err = chat_typing("Again.\n", "--name", "Robin")
        assert code == 0, err
        system = llm_server.requests[-1]["messages"][0]["content"]
        assert "writes letters to Captain Ana." in system and "Robin" not in system.split("Captain Ana")[0]
