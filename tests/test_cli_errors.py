"""What the CLI says when it cannot go on: no token, a bad setting, an unreachable or vanishing
database, a usage error; always one line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runs import run_cli


@pytest.mark.parametrize(
    ("module", "args"),
    [("bot.cli", ["run"]), ("bot", []), ("bot.cli", ["sync-commands", "--guild", "42"])],
    ids=["personae-run", "python-m-bot", "sync-commands"],
)
def test_discord_commands_without_token_explain(tmp_path: Path, module: str, args: list[str]) -> None:
    result = run_cli(*args, database_url=None, cwd=tmp_path, module=module)
    assert result.returncode == 1
    assert "DISCORD_TOKEN" in result.stderr
    assert "discord.com/developers" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_setting_is_one_line(tmp_path: Path) -> None:
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


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    result = run_cli("personality", "list", database_url="postgresql://nobody@127.0.0.1:1/none", cwd=tmp_path)
    assert result.returncode == 1
    assert "Cannot reach DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["personality", "create"], ["nonsense"]])
def test_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(*args, database_url=None, cwd=tmp_path)
    assert result.returncode == 2
    assert "usage: personae" in result.stderr


def test_a_database_that_goes_away_mid_command_is_one_line_not_a_traceback() -> None:
    """SQLAlchemy wraps the driver's error when the server stops mid-statement (seen when PostgreSQL
    restarts during an import); a statement error is not mistaken for an unreachable database."""
    import asyncpg
    from sqlalchemy.exc import DBAPIError, InterfaceError

    from bot.cli.app import explain_connection_error
    from bot.settings import load_bot_settings

    settings = load_bot_settings(database_url="postgresql://u:p@db.example/personae")
    gone = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    for wrapped in (
        InterfaceError("INSERT ...", None, gone),
        DBAPIError("INSERT ...", None, asyncpg.exceptions.AdminShutdownError("terminating connection")),
    ):
        line = explain_connection_error(wrapped, settings)
        assert line is not None and line.startswith("Cannot reach DATABASE_URL: ")
        assert "\n" not in line and "sqlalche.me" not in line
    bad_column = DBAPIError("SELECT nope", None, asyncpg.exceptions.UndefinedColumnError("no such column"))
    assert explain_connection_error(bad_column, settings) is None


def test_the_asyncpg_adapters_wrapped_connection_error_is_one_line_too() -> None:
    """Through SQLAlchemy's asyncpg dialect the error is DBAPIError -> the adapter's InterfaceError ->
    asyncpg's error (its __cause__): the chain is followed to the connection's fate."""
    import asyncpg
    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi
    from sqlalchemy.exc import InterfaceError

    from bot.cli.app import explain_connection_error
    from bot.settings import load_bot_settings

    settings = load_bot_settings(database_url=None)
    # SQLAlchemy's asyncpg adapter is untyped.
    adapter_errors = AsyncAdapt_asyncpg_dbapi(asyncpg)  # type: ignore[no-untyped-call]
    for cause in (
        asyncpg.exceptions.InterfaceError("connection is closed"),
        asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"),
    ):
        try:
            try:
                raise cause
            except Exception as error:
                raise adapter_errors.InterfaceError(str(error)) from error  # type: ignore[no-untyped-call]
        except Exception as adapted:
            wrapped = InterfaceError("INSERT ...", None, adapted)
        line = explain_connection_error(wrapped, settings)
        assert line is not None and line.startswith("Cannot reach the embedded PostgreSQL: ")
        assert str(cause) in line
