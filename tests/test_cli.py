"""The CLI as users and scripts run it: a real subprocess against the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli import build_parser
from bot.cli.llm_configs import cmd_llm_config_add, cmd_llm_config_list, cmd_llm_config_remove
from memory.errors import NotFoundError


def run_cli(
    *args: str, database_url: str | None, cwd: Path, module: str = "bot.cli", **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DISCORD_TOKEN"}}
    if database_url:
        environ["DATABASE_URL"] = database_url
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=environ,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_help_imports_nothing_heavy() -> None:
    """`personae --help` must stay instant: no litellm, discord, torch or SQLAlchemy on that path."""
    code = (
        "import sys, contextlib, io\n"
        "from bot.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "heavy = {'litellm', 'discord', 'torch', 'sqlalchemy', 'qdrant_client', 'sentence_transformers'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_personality_commands(scratch_database_url: str, tmp_path: Path) -> None:
    # A plain postgresql:// URL, as users write it; the CLI migrates the empty database itself.
    url = scratch_database_url.replace("+asyncpg", "")
    created = run_cli(
        "personality",
        "create",
        "Cli Bot",
        "--memory-mode",
        "hybrid",
        "--owner",
        "99",
        database_url=url,
        cwd=tmp_path,
    )
    assert created.returncode == 0, created.stderr
    assert "Created personality 'cli-bot'" in created.stdout

    again = run_cli(
        "personality", "create", "cli-bot", "--memory-mode", "verbatim", database_url=url, cwd=tmp_path
    )
    assert again.returncode == 0
    assert "already exists" in again.stdout

    listed = run_cli("personality", "list", database_url=url, cwd=tmp_path)
    assert listed.returncode == 0
    assert any(line.split()[:1] == ["cli-bot"] and "hybrid" in line for line in listed.stdout.splitlines())

    shown = run_cli("personality", "show", "cli-bot", database_url=url, cwd=tmp_path)
    assert "owner:            99" in shown.stdout
    assert "mode hybrid" in shown.stdout

    missing = run_cli("personality", "show", "nobody", database_url=url, cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("personae: No personality named 'nobody'")

    upgraded = run_cli("db", "upgrade", database_url=url, cwd=tmp_path)
    assert upgraded.returncode == 0
    assert "head" in upgraded.stdout


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


async def test_llm_config_add_list_remove(runtime: Any, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(
        [
            "llm-config",
            "add",
            "local",
            "openai/qwen",
            "--api-base",
            "http://127.0.0.1:8000/v1",
            "--api-key-env",
            "K",
        ]
    )
    assert args.handler is cmd_llm_config_add
    await cmd_llm_config_add(args, runtime)
    await cmd_llm_config_list(parser.parse_args(["llm-config", "list"]), runtime)
    out = capsys.readouterr().out
    assert "Added LLM config 'local'" in out
    assert "local" in out and "http://127.0.0.1:8000/v1" in out and " K" in out
    assert f"{'NAME':<24} {'MODEL':<32} {'API BASE':<32} KEY ENV\n" in out
    assert f"{'local':<24} {'openai/qwen':<32} {'http://127.0.0.1:8000/v1':<32} K\n" in out
    await cmd_llm_config_remove(parser.parse_args(["llm-config", "remove", "local"]), runtime)
    assert await runtime.llm_configs.list() == []
    await cmd_llm_config_list(parser.parse_args(["llm-config", "list"]), runtime)
    assert capsys.readouterr().out.startswith("Removed LLM config 'local'.\nNo LLM configs yet.")
    with pytest.raises(NotFoundError):
        await cmd_llm_config_remove(parser.parse_args(["llm-config", "remove", "local"]), runtime)


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
    adapter_errors = AsyncAdapt_asyncpg_dbapi(asyncpg)
    for cause in (
        asyncpg.exceptions.InterfaceError("connection is closed"),
        asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"),
    ):
        try:
            try:
                raise cause
            except Exception as error:
                raise adapter_errors.InterfaceError(str(error)) from error
        except Exception as adapted:
            wrapped = InterfaceError("INSERT ...", None, adapted)
        line = explain_connection_error(wrapped, settings)
        assert line is not None and line.startswith("Cannot reach the embedded PostgreSQL: ")
        assert str(cause) in line


def test_character_card_import_export_round_trip(scratch_database_url: str, tmp_path: Path) -> None:
    """`personality import` reads a V3 PNG card, `export` writes it as V3 JSON that imports back."""
    from tests.memory.owners.cards import SERAPHINA_V2, bomb_chunk, card_png, png, v3

    url = scratch_database_url.replace("+asyncpg", "")
    icon = "https://img.example/seraphina.png"
    card = tmp_path / "seraphina.png"
    card.write_bytes(
        card_png(v3(SERAPHINA_V2, assets=[{"type": "icon", "uri": icon, "name": "main"}]), "ccv3")
    )
    imported = run_cli("personality", "import", str(card), "--owner", "42", database_url=url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "Imported V3 card 'Seraphina' as personality 'seraphina'." in imported.stdout
    assert f"avatar:   {icon}" in imported.stdout  # no host for the picture here: the card's own URL

    shown = run_cli("personality", "show", "seraphina", database_url=url, cwd=tmp_path)
    assert "owner:            42" in shown.stdout
    assert "  Write Seraphina's next reply in a gentle fantasy roleplay." in shown.stdout

    out = tmp_path / "out.json"
    exported = run_cli("personality", "export", "seraphina", "-o", str(out), database_url=url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    written = json.loads(out.read_text())
    assert written["spec"] == "chara_card_v3" and written["avatar"] == icon
    assert {k: written["data"][k] for k in SERAPHINA_V2["data"]} == SERAPHINA_V2["data"]
    to_stdout = run_cli("personality", "export", "seraphina", database_url=url, cwd=tmp_path)
    assert json.loads(to_stdout.stdout) == written

    clash = run_cli("personality", "import", str(out), database_url=url, cwd=tmp_path)
    assert clash.returncode == 1
    assert clash.stderr == "personae: A personality named 'seraphina' already exists; pick another name.\n"
    copy = run_cli("personality", "import", str(out), "--name", "sera-2", database_url=url, cwd=tmp_path)
    assert copy.returncode == 0, copy.stderr
    again = run_cli("personality", "show", "sera-2", database_url=url, cwd=tmp_path)
    assert again.stdout.split("system prompt:")[1] == shown.stdout.split("system prompt:")[1]

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png(bomb_chunk("chara", b"zTXt")))
    refused = run_cli("personality", "import", str(bomb), database_url=url, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith("personae: The PNG's zTXt 'chara' chunk inflates to over 5 MiB")
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    listed = run_cli("personality", "list", database_url=url, cwd=tmp_path)
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["sera-2", "seraphina"]
