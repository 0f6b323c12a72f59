"""The embedded PostgreSQL goes away when nobody needs it: after a quiet spell with no client, and at
once when its data directory is deleted; a connected client keeps it. Run as users run it: `personae`
commands in subprocesses, each on a data directory of its own."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest

from models.database import running_embedded_postgres, start_embedded_postgres, stop_embedded_postgres


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Short and world-traversable (the server runs as another user when tests run as root)."""
    path = Path(tempfile.mkdtemp(prefix="personae-life-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        stop_embedded_postgres(path)
        shutil.rmtree(path, ignore_errors=True)


def personae(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DISCORD_TOKEN"}}
    environ.update(PERSONAE_DATA_DIR=str(data_dir), EMBEDDED_POSTGRES_IDLE_MINUTES="10")
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=environ,
        capture_output=True,
        text=True,
        cwd=data_dir,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result


def servers_of(data_dir: Path) -> list[psutil.Process]:
    """The postgres processes serving data_dir (the server and its backends)."""
    pgdata = str((data_dir / "postgres").resolve())
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and pgdata in (process.info["cmdline"] or []):
            found.append(process)
    return found


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait for something the watchdog does on its next looks (seconds); a minute means it never will."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_an_idle_server_stops_by_itself_while_a_client_keeps_it_up(data_dir: Path) -> None:
    # Started as a command starts it, with a spell of 3 s, and joined at once by a client.
    url = start_embedded_postgres(data_dir, keep_running=True, idle_minutes=0.05)
    server = running_embedded_postgres(data_dir)
    assert server is not None

    async def hold() -> str:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await asyncio.sleep(6)  # twice the spell: the watchdog saw the client and kept the server
            assert running_embedded_postgres(data_dir) == server
            return personae(data_dir, "db", "status").stdout
        finally:
            await connection.close()

    status = asyncio.run(hold())
    assert "stops:    by itself after 3 s with no client; clients are connected now" in status
    eventually(lambda: running_embedded_postgres(data_dir) is None, "the idle server did not stop")
    eventually(lambda: not servers_of(data_dir), "postgres processes were left behind")
    assert "not running (the next command starts it)" in personae(data_dir, "db", "status").stdout


def test_a_server_goes_when_its_data_directory_does(data_dir: Path) -> None:
    assert servers_of(data_dir) == []
    personae(data_dir, "personality", "create", "Sage")
    assert servers_of(data_dir)
    status = personae(data_dir, "db", "status").stdout
    assert "stops:    by itself at " in status
    assert "(10 minutes with no client) unless a client connects" in status
    # The server writes and removes files in it meanwhile: a first pass may meet one that just went.
    while (data_dir / "postgres").exists():
        shutil.rmtree(data_dir / "postgres", ignore_errors=True)
    eventually(lambda: not servers_of(data_dir), "the server of a deleted data directory kept running")
