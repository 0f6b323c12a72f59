"""Personalities and LLM configs through the CLI against the test database: every command and option
described, creating, showing, changing and deleting as Discord does, character cards in and out, and
values refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import build_parser
from bot.cli.llm_configs import cmd_llm_config_add, cmd_llm_config_list, cmd_llm_config_remove
from bot.runtime import Runtime
from memory.errors import NotFoundError
from tests.cli_runs import in_process, one_line_error


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
