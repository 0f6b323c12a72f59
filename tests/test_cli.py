"""The CLI as users and scripts run it against the test database: in a real subprocess where a process
shows something (exit on a signal, a pipe, another process holding the index, what a cold start imports),
in-process (`in_process`) where only the output is checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import build_parser
from bot.cli.llm_configs import cmd_llm_config_add, cmd_llm_config_list, cmd_llm_config_remove
from bot.runtime import Runtime
from memory.errors import NotFoundError
from testkit.cli import run


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


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`personae ARGS` run in this process (the `cli_env` fixture's environment), reported as `run_cli`
    reports it: what only the output shows needs no interpreter start-up of its own (1-2 s a command)."""
    code, out, err = run(capsys, *args)
    return subprocess.CompletedProcess(list(args), code, out, err)


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


def test_every_command_and_option_says_what_it_is() -> None:
    """`personae --help` and `personae COMMAND --help`: each command a description, each option a help."""
    import argparse

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                for name, command in action.choices.items():
                    if not helps.get(name) or not command.description:
                        missing.append(f"{path} {name}")
                    walk(command, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "personae")
    assert missing == []
    text = subprocess.run(
        [sys.executable, "-m", "bot.cli", "personality", "set", "--help"], capture_output=True, text=True
    ).stdout
    assert (
        "hybrid (the summary is what recall searches, the exchange word for word is kept with it)"
        in " ".join(text.split())
    )


def test_personality_commands(
    cli_env: Path,
    scratch_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A plain postgresql:// URL, as users write it.
    monkeypatch.setenv("DATABASE_URL", scratch_database_url.replace("+asyncpg", ""))
    created = in_process(
        capsys, "personality", "create", "Cli Bot", "--memory-mode", "hybrid", "--owner", "99"
    )
    assert created.returncode == 0, created.stderr
    assert "Created personality 'cli-bot'" in created.stdout

    again = in_process(capsys, "personality", "create", "cli-bot", "--memory-mode", "verbatim")
    assert again.returncode == 0
    assert "already exists" in again.stdout

    listed = in_process(capsys, "personality", "list")
    assert listed.returncode == 0
    assert any(line.split()[:1] == ["cli-bot"] and "hybrid" in line for line in listed.stdout.splitlines())

    shown = in_process(capsys, "personality", "show", "cli-bot")
    assert "owner:             99" in shown.stdout
    assert "mode hybrid" in shown.stdout

    missing = in_process(capsys, "personality", "show", "nobody")
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("personae: No personality named 'nobody'")

    upgraded = in_process(capsys, "db", "upgrade")
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


async def test_llm_config_add_list_remove(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
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


def test_character_card_import_export_round_trip(
    cli_env: Path,
    scratch_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`personality import` reads a V3 PNG card, `export` writes it as V3 JSON that imports back."""
    from tests.memory.owners.cards import SERAPHINA_V2, bomb_chunk, card_png, png, v3

    tmp_path = cli_env
    monkeypatch.setenv("DATABASE_URL", scratch_database_url.replace("+asyncpg", ""))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return in_process(capsys, *args)

    icon = "https://img.example/seraphina.png"
    card = tmp_path / "seraphina.png"
    card.write_bytes(
        card_png(v3(SERAPHINA_V2, assets=[{"type": "icon", "uri": icon, "name": "main"}]), "ccv3")
    )
    imported = cli("personality", "import", str(card), "--owner", "42")
    assert imported.returncode == 0, imported.stderr
    assert "Imported V3 card 'Seraphina' as personality 'seraphina' (verbatim)." in imported.stdout
    assert f"avatar:   {icon}" in imported.stdout  # no host for the picture here: the card's own URL

    shown = cli("personality", "show", "seraphina")
    assert "owner:             42" in shown.stdout
    assert "  Write Seraphina's next reply in a gentle fantasy roleplay." in shown.stdout

    out = tmp_path / "out.json"
    exported = cli("personality", "export", "seraphina", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    written = json.loads(out.read_text())
    assert written["spec"] == "chara_card_v3" and written["avatar"] == icon
    assert {k: written["data"][k] for k in SERAPHINA_V2["data"]} == SERAPHINA_V2["data"]
    to_stdout = cli("personality", "export", "seraphina")
    assert json.loads(to_stdout.stdout) == written

    clash = cli("personality", "import", str(out))
    assert clash.returncode == 1
    assert clash.stderr == (
        "personae: A personality named 'seraphina' already exists; import the card under another name "
        "with --name NAME.\n"
    )
    # Under another name only, the copy would read exactly like the first wherever it answers.
    same_look = cli("personality", "import", str(out), "--name", "sera-2")
    assert "'Seraphina' reads like the existing personality" in same_look.stderr
    assert "Give this copy a display name of its own" in same_look.stderr  # the fix, named
    copy = cli(
        "personality",
        "import",
        str(out),
        "--name",
        "sera-2",
        "--memory-mode",
        "summarized",
        "--display-name",
        "Seraphina II",
    )
    assert copy.returncode == 0, copy.stderr
    assert "card 'Seraphina II' as personality 'sera-2' (summarized)" in copy.stdout
    again = cli("personality", "show", "sera-2")
    assert "  Write Seraphina II's next reply in a gentle fantasy roleplay." in again.stdout
    assert "mode summarized" in again.stdout

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png(bomb_chunk("chara", b"zTXt")))
    refused = cli("personality", "import", str(bomb))
    assert refused.returncode == 1
    assert refused.stderr.startswith("personae: The PNG's zTXt 'chara' chunk inflates to over 5 MiB")
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    listed = cli("personality", "list")
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["sera-2", "seraphina"]


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed: exactly one line, `personae: ...`, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("personae: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.strip()


def test_the_cli_changes_and_deletes_a_personality_as_discord_does(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's dead end: a card arrives verbatim and the CLI could not turn summarization on; an
    LLM config named as a model was accepted and failed at the first reply."""
    tmp_path = cli_env

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return in_process(capsys, *args)

    assert (
        cli(
            "llm-config", "add", "local", "openai/test-model", "--api-base", "http://127.0.0.1:9/v1"
        ).returncode
        == 0
    )
    assert one_line_error(cli("personality", "create", "Bob", "--model", "local")) == (
        "personae: 'local' is an LLM config, not a model string: choose it with --llm-config local."
    )
    assert cli("personality", "create", "Bob", "--llm-config", "local").returncode == 0
    assert (
        "chat model:        LLM config local (openai/test-model)" in cli("personality", "show", "bob").stdout
    )
    assert "Unknown LLM provider in model 'madeup'" in one_line_error(
        cli("personality", "set", "bob", "--model", "madeup")
    )

    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are Bobby, a gardener.\nYou speak softly.", encoding="utf-8")
    summarizer_prompt = tmp_path / "summarizer.txt"
    summarizer_prompt.write_text("Keep every plant's name.", encoding="utf-8")
    changed = cli(
        "personality",
        "set",
        "bob",
        "--display-name",
        "Bobby",
        "--prompt-file",
        str(prompt),
        "--memory-mode",
        "summarized",
        "--summarizer-model",
        "openai/test-summarizer",
        "--summarizer-prompt-file",
        str(summarizer_prompt),
        "--avatar",
        "https://img.example/bobby.png",
        "--memory",
        "off",
    )
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout == "Updated personality 'bob' (Bobby): memory off, mode summarized.\n"
    shown = cli("personality", "show", "bob").stdout
    for line in (
        "display name:      Bobby",
        "memory:            off, mode summarized",
        "summarizer model:  openai/test-summarizer",
        "summarizer prompt: its own, 24 characters",
        "avatar:            https://img.example/bobby.png",
        "  You are Bobby, a gardener.\n  You speak softly.",
    ):
        assert line in shown
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Caf\u00e9".encode("latin-1"))
    assert "is not UTF-8 text (byte 3)" in one_line_error(
        cli("personality", "set", "bob", "--prompt-file", str(latin1))
    )

    # What `resummarize` asks for, the CLI can now do; and it runs.
    resummarized = cli("resummarize", "--personality", "bob")
    assert resummarized.returncode == 0, resummarized.stderr
    assert resummarized.stdout.startswith("Re-summarized 0 of 0 memories")

    assert "Pass --yes to confirm" in one_line_error(cli("personality", "delete", "bob"))
    assert "bob" in cli("personality", "list").stdout
    deleted = cli("personality", "delete", "bob", "--yes")
    assert deleted.stdout == "Deleted personality 'bob' with its 0 memories and conversations.\n"
    assert cli("personality", "list").stdout.startswith("No personalities yet.")


def test_names_discord_refuses_and_look_alikes_are_refused_in_one_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return in_process(capsys, *args)

    assert cli("personality", "create", "Lilith").returncode == 0
    assert one_line_error(cli("personality", "create", "L\u0456lith")) == (
        "personae: 'L\u0456lith' reads like the existing personality 'Lilith' (`lilith`): pick a name that "
        "looks different."
    )
    assert "Discord refuses to post under a name containing 'clyde'" in one_line_error(
        cli("personality", "create", "Helper", "--display-name", "Clyde Jr")
    )
    assert [line.split()[0] for line in cli("personality", "list").stdout.splitlines()[1:]] == ["lilith"]


def test_values_too_long_for_their_columns_or_unreadable_files_are_one_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = cli_env

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return in_process(capsys, *args)

    long_id = "9" * 65
    assert "The owner id is 65 characters; an id is at most 64" in one_line_error(
        cli("personality", "create", "Sage", "--owner", long_id)
    )
    assert cli("personality", "create", "Sage").returncode == 0
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text('{"id": "1", "role": "user", "content": "hi"}\n', encoding="utf-8")
    assert "--user is 65 characters" in one_line_error(
        cli("import", str(transcript), "--personality", "sage", "--user", long_id)
    )
    assert "--user is 65 characters" in one_line_error(
        cli("recall", "hi", "--personality", "sage", "--user", long_id)
    )
    assert "--user is 65 characters" in one_line_error(cli("memory", "list", "--user", long_id))
    assert "at most 200 characters" in one_line_error(cli("llm-config", "add", "big", "openai/" + "x" * 200))
    assert "Max tokens" in one_line_error(
        cli("llm-config", "add", "big", "openai/x", "--max-tokens", str(2**40))
    )
    queries = tmp_path / "queries.txt"
    queries.write_bytes(b"caf\xe9\n")
    assert one_line_error(
        cli("recall", "--queries-file", str(queries), "--personality", "sage", "--user", "1")
    ) == (f"personae: {queries} is not UTF-8 text (byte 3); save the queries as UTF-8.")


def test_a_reader_that_goes_away_ends_the_output_quietly(
    cli_env: Path, scratch_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`personae recall ... | head -4` was reported as a database failure."""
    tmp_path = cli_env
    assert in_process(capsys, "personality", "create", "Sage").returncode == 0
    queries = tmp_path / "queries.txt"
    queries.write_text("".join(f"where did I plant tomatoes {n}?\n" for n in range(3000)), encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if k != "DISCORD_TOKEN"}
    environ.update(DATABASE_URL=scratch_database_url, PERSONAE_DATA_DIR=str(tmp_path / "data"))
    command = (
        f"{sys.executable} -m bot.cli recall --queries-file {queries} --personality sage --user 1 | head -4; "
        'echo "exit ${PIPESTATUS[0]}" >&2'
    )
    result = subprocess.run(
        ["bash", "-c", command], env=environ, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert result.stdout.splitlines() == [
        "where did I plant tomatoes 0?",
        "  (no memories)",
        "where did I plant tomatoes 1?",
        "  (no memories)",
    ]
    assert result.stderr == "exit 141\n"  # as a program SIGPIPE ended, and nothing printed


def test_commands_that_read_only_postgresql_run_while_another_process_holds_the_index(
    scratch_database_url: str, tmp_path: Path
) -> None:
    from memory.recall.edge import EdgeVectorIndex

    env = {"PERSONAE_DATA_DIR": str(tmp_path / "data")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, database_url=scratch_database_url, cwd=tmp_path, **env)

    assert cli("personality", "create", "Sage").returncode == 0
    held = EdgeVectorIndex(tmp_path / "data" / "qdrant")  # as the bot or `personae chat` holds it
    try:
        for args in (
            ("memory", "stats"),
            ("memory", "list", "--user", "1"),
            ("memory", "export", "--user", "1"),
            ("personality", "list"),
            ("personality", "set", "sage", "--memory-mode", "hybrid"),
        ):
            result = cli(*args)
            assert result.returncode == 0, (args, result.stderr)
        assert "is in use by another process" in one_line_error(
            cli("recall", "x", "--personality", "sage", "--user", "1")
        )
    finally:
        import asyncio

        asyncio.run(held.close())


def test_a_command_imports_what_it_needs_only(
    cli_env: Path, scratch_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What keeps a cold command fast: no Alembic once the schema is current, no litellm unless a model is
    called, no embedding runtime for a report that reads PostgreSQL."""
    tmp_path = cli_env
    assert in_process(capsys, "personality", "create", "Sage").returncode == 0
    heavy = {
        "litellm",
        "alembic",
        "discord",
        "torch",
        "onnxruntime",
        "qdrant_client",
        "pgserver",
    }

    def imported(*argv: str) -> set[str]:
        code = (
            "import sys\n"
            "from bot.cli import main\n"
            f"code = main({list(argv)!r})\n"
            f"print(sorted({heavy!r} & set(sys.modules)))\n"
            "sys.exit(code)\n"
        )
        environ = {k: v for k, v in os.environ.items() if k != "DISCORD_TOKEN"}
        environ.update(DATABASE_URL=scratch_database_url, PERSONAE_DATA_DIR=str(tmp_path / "data"))
        result = subprocess.run(
            [sys.executable, "-c", code],
            env=environ,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return set(json.loads(result.stdout.splitlines()[-1].replace("'", '"')))

    assert imported("personality", "list") == set()
    assert imported("memory", "stats") == set()
    assert imported("recall", "tomatoes", "--personality", "sage", "--user", "1") == {"onnxruntime"}


@pytest.fixture
def embedded_data_dir() -> Iterator[Path]:
    """A data directory of its own for the embedded PostgreSQL, short and world-traversable (the server
    runs as another user when tests run as root); its server is stopped however the test ends."""
    import shutil
    import tempfile

    from models.database import stop_embedded_postgres

    path = Path(tempfile.mkdtemp(prefix="personae-cli-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        stop_embedded_postgres(path)
        shutil.rmtree(path, ignore_errors=True)


def test_the_embedded_postgresql_stays_up_between_commands_until_stopped_and_recovers_from_a_crash(
    embedded_data_dir: Path,
) -> None:
    import psutil

    from models.database import running_embedded_postgres

    env = {"PERSONAE_DATA_DIR": str(embedded_data_dir)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, database_url=None, cwd=embedded_data_dir, **env)

    where = embedded_data_dir / "postgres"
    assert cli("db", "status").stdout == (
        f"database: the embedded PostgreSQL in {where}, not running (the next command starts it)\n"
    )
    assert cli("personality", "create", "Sage").returncode == 0
    server = running_embedded_postgres(embedded_data_dir)
    assert server is not None  # still up after the command ended
    status = cli("db", "status").stdout
    assert (
        f"running (pid {server.pid}," in status
        and "schema:   revision" in status
        and "(the newest)" in status
    )
    assert cli("personality", "list").stdout.splitlines()[1].startswith("sage")
    assert running_embedded_postgres(embedded_data_dir) == server  # joined, not restarted

    # Another process on it: `db stop` says so rather than cut it off.
    import asyncio

    import asyncpg

    async def hold_and_stop() -> subprocess.CompletedProcess[str]:
        connection = await asyncpg.connect(host=str(server.socket_dir), user="postgres", database="personae")
        try:
            return await asyncio.to_thread(cli, "db", "stop")
        finally:
            await connection.close()

    assert "1 other connection(s) to the embedded PostgreSQL are open" in one_line_error(
        asyncio.run(hold_and_stop())
    )
    assert cli("db", "stop").stdout == f"Stopped the embedded PostgreSQL in {where}.\n"
    assert running_embedded_postgres(embedded_data_dir) is None
    assert cli("db", "stop").stdout == f"No PostgreSQL runs in {where}.\n"

    # A crash: the server killed, its postmaster.pid left behind; the next command starts it afresh.
    assert cli("personality", "list").returncode == 0
    crashed = running_embedded_postgres(embedded_data_dir)
    assert crashed is not None
    process = psutil.Process(crashed.pid)
    children = process.children(recursive=True)
    process.kill()
    psutil.wait_procs([process, *children], timeout=30)
    assert (where / "postmaster.pid").exists()
    assert cli("personality", "list").stdout.splitlines()[1].startswith("sage")

    # Up, but its socket deleted (a cleaner emptied the folder): restarted, not reported unreachable.
    up = running_embedded_postgres(embedded_data_dir)
    assert up is not None
    (up.socket_dir / f".s.PGSQL.{up.port}").unlink()
    assert cli("personality", "list").stdout.splitlines()[1].startswith("sage")

    # A stale postmaster.pid whose pid now belongs to another process (after a reboot, say).
    assert cli("db", "stop").returncode == 0
    stale = ["", str(where), "0", "5432", str(where), "", "0 0", "ready   "]
    stale[0] = str(os.getpid())
    (where / "postmaster.pid").write_text("\n".join(stale) + "\n")
    assert cli("personality", "list").stdout.splitlines()[1].startswith("sage")
    assert running_embedded_postgres(embedded_data_dir) is not None


def test_sigterm_stops_the_worker_in_order_as_ctrl_c_does(scratch_database_url: str, tmp_path: Path) -> None:
    """`docker stop` and systemd send SIGTERM: the worker ends its pass and closes what it holds, exit 0,
    rather than dying where it stands (or, as a container's first process, ignoring it until killed)."""
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DISCORD_TOKEN"}}
    environ["DATABASE_URL"] = scratch_database_url.replace("+asyncpg", "")
    environ["PERSONAE_DATA_DIR"] = str(tmp_path)
    worker = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "worker"],
        env=environ,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        for line in worker.stderr:  # the worker is at work: its signal handler is in place
            if "Memory worker started" in line:
                break
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert "Traceback" not in err
