"""A card's `{{user}}` is the name the user chats under, filled when the prompt is built (not fixed as
"User" at import): the terminal's --name, then their persona once they set one."""

from __future__ import annotations

import json
from pathlib import Path

from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae


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


async def test_a_cards_user_is_the_name_the_user_chats_under(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: "The lamp is lit."
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    code, out, err = await personae("personality", "import", str(card(tmp_path)), env=env, cwd=tmp_path)
    assert code == 0, err
    code, out, err = await personae("personality", "show", "seren", env=env, cwd=tmp_path)
    assert "writes letters to {{user}}" in out and "the user" not in out  # kept for each chat to fill

    chat = ("chat", "--personality", "seren", "--user", "42")
    code, out, err = await personae(*chat, "--name", "Robin", env=env, cwd=tmp_path, stdin=b"Hello.\n")
    assert code == 0, err
    system = llm_server.requests[-1]["messages"][0]["content"]
    assert "Seren keeps the lighthouse and writes letters to Robin." in system
    assert "Scenario: Robin visits at dusk." in system
    assert "Robin: Is the lamp lit?\nSeren: Always, Robin." in system
    assert "{{user}}" not in system and "the user" not in system

    code, _, err = await personae("persona", "set", "Captain Ana", "--user", "42", env=env, cwd=tmp_path)
    assert code == 0, err
    code, out, err = await personae(*chat, "--name", "Robin", env=env, cwd=tmp_path, stdin=b"Again.\n")
    assert code == 0, err
    system = llm_server.requests[-1]["messages"][0]["content"]
    assert "writes letters to Captain Ana." in system and "Robin" not in system.split("Captain Ana")[0]
