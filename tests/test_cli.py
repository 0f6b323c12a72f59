"""The CLI as only a real process shows it: what a cold start imports, a reader that goes away, another
process holding the index, the embedded PostgreSQL between commands, the worker on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_runs import in_process, one_line_error, run_cli


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
