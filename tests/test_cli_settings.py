"""`personae persona` and `personae memory status|settings|incognito|reset`: what /persona and /memory
do, through the same services, run in-process through `main()` against a scratch database."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    for variable in ("QDRANT_URL", "SUMMARIZER_MODEL", "CHAT_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_persona_set_show_clear(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "personality", "create", "Sage")[0] == 0
    code, out = run(capsys, "persona", "show", "--user", "42")
    assert code == 0 and "User 42 has no persona for every personality" in out

    code, out = run(capsys, "persona", "set", "Ana", "--pronouns", "she/her", "--user", "42")
    assert code == 0 and "Saved." in out and "name:     Ana" in out and "pronouns: she/her" in out
    code, out = run(capsys, "persona", "set", "Captain Ana", "--user", "42", "--personality", "sage")
    assert code == 0 and "for Sage" in out

    code, out = run(capsys, "persona", "show", "--user", "42")
    assert "name:     Ana" in out and "For single personalities: Captain Ana with Sage" in out
    code, out = run(capsys, "memory", "status", "--user", "42", "--personality", "sage")
    assert code == 0 and "Persona: Captain Ana, set for this personality" in out

    code, out = run(capsys, "persona", "clear", "--user", "42", "--personality", "sage")
    assert code == 0 and "Sage will know them by the global persona, Ana (she/her)." in out
    code, out = run(capsys, "persona", "show", "--user", "42", "--personality", "sage")
    assert "no persona of their own for Sage" in out and "name:     Ana" in out
    code, out = run(capsys, "persona", "set", "x" * 81, "--user", "42")  # the service's own check
    assert code == 1 and out.startswith("personae: The name can be at most 80 characters long")


def test_memory_settings_incognito_status_reset(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "personality", "create", "Sage", "--memory-mode", "hybrid")[0] == 0
    code, out = run(capsys, "memory", "settings", "--user", "7")
    assert code == 0 and out.strip() == (
        "Settings of user 7 with every personality: memory inherited, summarization default."
    )
    sage = ("--user", "7", "--personality", "sage")
    code, out = run(capsys, "memory", "settings", *sage, "--summarization", "disabled")
    assert code == 0 and "Saved: user 7 with Sage: memory inherited, summarization disabled." in out
    code, out = run(capsys, "memory", "status", "--user", "7", "--personality", "sage")
    assert "Stored as: verbatim (set by user (this personality))" in out, out

    code, out = run(capsys, "memory", "settings", "--user", "7", "--memory", "off")
    assert code == 0 and "memory off" in out and "No new memories will be stored." in out
    code, out = run(capsys, "memory", "status", "--user", "7", "--personality", "sage")
    assert "Memory: off (set by user)" in out, out

    code, out = run(capsys, "memory", "incognito", "on", *sage, "--for", "1h")
    assert code == 0 and "Incognito is on for user 7 with Sage, until " in out
    code, out = run(capsys, "memory", "status", "--user", "7")
    assert "Incognito: on with Sage, until " in out and "Persona: none" in out
    code, out = run(capsys, "memory", "incognito", "off", "--user", "7")
    assert code == 0 and "Incognito is off for user 7 with every personality" in out
    code, out = run(capsys, "memory", "status", "--user", "7")
    assert "Incognito: off" in out

    code, out = run(capsys, "memory", "reset", "--user", "7", "--personality", "sage")
    assert code == 0 and "Sage has no conversation summary with user 7 in the terminal chat" in out
    code, out = run(capsys, "memory", "reset", "--user", "7", "--personality", "sage", "--channel", "5")
    assert code == 1 and "--channel needs --guild" in out
