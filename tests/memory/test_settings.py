"""Settings: read only when asked, and every bad value reported in one line naming its variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory.settings import SettingsError, load_settings


def test_defaults_use_embedded_services(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("DATABASE_URL", "QDRANT_URL", "PERSONAE_DATA_DIR", "DISCORD_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings()
    assert settings.database_url is None
    assert settings.qdrant_url is None
    assert settings.personae_data_dir == tmp_path / ".data"
    assert settings.discord_token is None


def test_postgres_url_gets_async_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db:5432/personae")
    assert load_settings().database_url == "postgresql+asyncpg://u:p@db:5432/personae"


def test_token_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc.def")
    settings = load_settings()
    assert "abc.def" not in repr(settings)
    assert settings.discord_token is not None
    assert settings.discord_token.get_secret_value() == "abc.def"


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


def test_cli_reports_bad_setting_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "personality", "list"],
        env={"PATH": "/usr/bin:/bin", "LLM_TIMEOUT": "-3", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "LLM_TIMEOUT" in result.stderr
    assert "Traceback" not in result.stderr
