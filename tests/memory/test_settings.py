"""The domain's settings: read only when asked, and every bad value reported in one line naming its
variable. (The bot's own settings, and the command line's report of a bad one, are tested in tests/bot
and tests/test_cli_errors.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.settings import SettingsError, load_settings


def test_defaults_use_embedded_services(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("DATABASE_URL", "QDRANT_URL", "PERSONAE_DATA_DIR", "CHAT_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings()
    assert settings.database_url is None
    assert settings.qdrant_url is None
    assert settings.personae_data_dir == tmp_path / ".data"
    assert settings.chat_api_key is None


def test_postgres_url_gets_async_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db:5432/personae")
    assert load_settings().database_url == "postgresql+asyncpg://u:p@db:5432/personae"


def test_api_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAT_API_KEY", "sk-abc.def")
    settings = load_settings()
    assert "sk-abc.def" not in repr(settings)
    assert settings.chat_api_key is not None
    assert settings.chat_api_key.get_secret_value() == "sk-abc.def"


def test_discord_settings_are_not_the_domains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc.def")
    monkeypatch.setenv("ADMIN_IDS", '["900"]')
    settings = load_settings()
    assert not hasattr(settings, "discord_token") and not hasattr(settings, "admin_ids")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DATABASE_URL", "mysql://localhost/x"),
        ("LLM_TIMEOUT", "soon"),
        ("CONTEXT_SHARE", "1.5"),
        ("LOG_LEVEL", "LOUD"),
    ],
)
def test_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as excinfo:
        load_settings()
    message = str(excinfo.value)
    assert variable in message
    assert "\n" not in message
