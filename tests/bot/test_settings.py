"""The bot's settings: the domain's plus Discord's, from the same environment, errors in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import load_bot_settings
from memory.settings import SettingsError


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("DISCORD_TOKEN", "ADMIN_IDS", "PERSONALITY_CREATOR_IDS", "DATABASE_URL", "PERSONAE_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    settings = load_bot_settings()
    assert settings.discord_token is None
    assert settings.admin_ids == []
    assert settings.personality_creator_ids is None  # anyone may create personalities
    assert (settings.cooldown_messages, settings.cooldown_seconds) == (5, 10.0)
    assert settings.missed_reply_minutes == 10.0  # missed messages older than this are not answered
    # The domain's settings come along, read from the same environment.
    assert settings.database_url is None
    assert settings.personae_data_dir == tmp_path / ".data"


def test_token_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc.def")
    settings = load_bot_settings()
    assert "abc.def" not in repr(settings)
    assert settings.discord_token is not None
    assert settings.discord_token.get_secret_value() == "abc.def"


def test_discord_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADMIN_IDS", '["900", "901"]')
    monkeypatch.setenv("COOLDOWN_MESSAGES", "2")
    monkeypatch.setenv("REMEMBERED_REACTION", "🧠")
    settings = load_bot_settings()
    assert settings.admin_ids == ["900", "901"]
    assert settings.cooldown_messages == 2
    assert settings.remembered_reaction == "🧠"


@pytest.mark.parametrize(
    ("variable", "value"), [("COOLDOWN_SECONDS", "0"), ("COOLDOWN_MESSAGES", "many"), ("LLM_TIMEOUT", "soon")]
)
def test_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as excinfo:
        load_bot_settings()
    message = str(excinfo.value)
    assert variable in message
    assert "\n" not in message


def test_shards_split_over_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARD_COUNT", "4")
    monkeypatch.setenv("SHARD_IDS", "[2, 3]")
    settings = load_bot_settings()
    assert (settings.shard_count, settings.shard_ids) == (4, [2, 3])
    assert load_bot_settings(shard_count=None, shard_ids=None).shard_ids is None  # all, in one process


@pytest.mark.parametrize(
    ("count", "ids", "said"),
    [
        (None, [0], "Invalid setting SHARD_IDS: needs SHARD_COUNT"),
        (2, [2], "Invalid setting SHARD_IDS: must be shard numbers from 0 to 1"),
        (2, [], "Invalid setting SHARD_IDS: must be shard numbers from 0 to 1"),
        (0, None, "Invalid setting SHARD_COUNT"),
    ],
)
def test_bad_shard_settings_are_one_line(count: int | None, ids: list[int] | None, said: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_bot_settings(shard_count=count, shard_ids=ids)
    assert str(refused.value).startswith(said)
