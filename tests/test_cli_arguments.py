"""Arguments the CLI cannot use are one line naming the fix, exit code 2 as argparse's own errors, never
a traceback: bytes that are not UTF-8 in any argument, a chat's --user or --name too long to store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main

ROOT = Path(__file__).parents[1]


def personae(*args: str | bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env |= {"PERSONAE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], capture_output=True, env=env, cwd=tmp_path, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["persona", "set", "Ana", "--user", b"\xff\xfe42"],
            "The value of --user ('\ufffd\ufffd42') is not valid UTF-8 text",
        ),
        (["memory", "correct", "0" * 8, b"caf\xe9", "--user", "1"], "The argument 'caf\ufffd' is not valid"),
        (
            ["chat", "--personality", "sage", "--name", b"R\xf6bin"],
            "The value of --name ('R\ufffdbin') is not valid UTF-8",
        ),
        (["chat", "--personality", "sage", "--user", "1" * 161], "--user is 161 characters; a user id is at"),
        (["chat", "--personality", "sage", "--name", "n" * 101], "--name is 101 characters; the name the"),
    ],
)
def test_an_argument_that_cannot_be_used_is_one_line_and_exit_2(
    args: list[str | bytes], said: str, tmp_path: Path
) -> None:
    result = personae(*args, tmp_path=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert err.startswith(f"personae: {said}") and err.count("\n") == 1, err
    assert "UTF-8" not in said or "pass it as UTF-8" in err


def test_text_that_would_drive_the_terminal_is_printed_escaped(
    monkeypatch: pytest.MonkeyPatch,
    scratch_database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every CLI output goes through one filter (bot.cli.output.printable): a persona's name carrying
    OSC 0 (the window title), OSC 52 (the clipboard) and CSI 2J (clear screen) comes back escaped."""
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    name = "Ana\x1b]0;pwned\x07\x1b]52;c;SGk=\x07\x1b[2J\x9b2J"
    assert main(["persona", "set", name, "--user", "42"]) == 0
    assert main(["persona", "show", "--user", "42"]) == 0
    out = capsys.readouterr().out
    assert "name:     Ana\\u001b]0;pwned\\u0007\\u001b]52;c;SGk=\\u0007\\u001b[2J\\u009b2J\n" in out
    assert not any(c in out for c in "\x1b\x07\x9b")
