"""How the CLI tests run `personae`: in a real subprocess (`run_cli`) or in this process (`in_process`),
and the one-line error a failed command must print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed: exactly one line, `personae: ...`, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("personae: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.strip()
