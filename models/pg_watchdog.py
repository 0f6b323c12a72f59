"""The embedded PostgreSQL's watchdog: it stops the server after a quiet spell with no client, and at once
when the server's data directory is gone.

Started beside the server by `models.database.start_embedded_postgres`, as a script run by its path
(standard library only: it must not import the models, nor hold a connection that would count as a
client). One at a time per data directory: it holds an exclusive lock on `personae-watchdog.lock` there.
What it sees is in `personae-watchdog.json` there, which `personae db status` reads.

    python models/pg_watchdog.py PGDATA POSTMASTER_PID SOCKET_DIR PORT PSQL IDLE_SECONDS
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LOCK = "personae-watchdog.lock"
STATE = "personae-watchdog.json"
CLIENTS_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


def _alive(pid: int, pgdata: Path) -> bool:
    """Whether pid is still the server of pgdata (not a process that reused its pid)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(pgdata) in args


def _clients(psql: str, socket_dir: str, port: str) -> int | None:
    """Client connections open on the server; None when it cannot be asked (starting, stopping)."""
    try:
        result = subprocess.run(
            [psql, "-h", socket_dir, "-p", port, "-U", "postgres", "-d", "postgres", "-Atc", CLIENTS_SQL],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(result.stdout.strip()) if result.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _write_state(pgdata: Path, **state: object) -> None:
    path = pgdata / STATE
    try:
        path.with_suffix(".tmp").write_text(json.dumps(state))
        path.with_suffix(".tmp").replace(path)
    except OSError:  # the directory is going away; the next look notices
        pass


def watch(pgdata: Path, postmaster: int, socket_dir: str, port: str, psql: str, idle_seconds: float) -> None:
    # A look every few seconds: "at once" for a deleted directory, cheap for an idle machine.
    interval = min(5.0, max(0.2, idle_seconds / 5)) if idle_seconds > 0 else 5.0
    idle_since: float | None = None
    while _alive(postmaster, pgdata):
        if not (pgdata / "PG_VERSION").exists():
            # Its data is gone: nothing it could serve is worth keeping (immediate shutdown).
            os.kill(postmaster, signal.SIGQUIT)
            return
        clients = _clients(psql, socket_dir, port)
        now = time.time()
        if clients:
            idle_since = None
        elif clients == 0 and idle_since is None:
            idle_since = now
        _write_state(
            pgdata, pid=os.getpid(), postmaster=postmaster, idle_seconds=idle_seconds, idle_since=idle_since
        )
        if idle_seconds > 0 and idle_since is not None and now - idle_since >= idle_seconds:
            if _clients(psql, socket_dir, port) == 0:  # none arrived since the last look
                os.kill(postmaster, signal.SIGINT)  # a fast shutdown, as `pg_ctl stop -m fast`
                return
            idle_since = None
        time.sleep(interval)


def main(argv: list[str]) -> int:
    pgdata, postmaster, socket_dir, port, psql, idle_seconds = argv
    # Detach: the process that started it returns at once and no one has to reap it.
    if os.fork() > 0:
        return 0
    os.setsid()
    path = Path(pgdata)
    try:
        lock = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return 0
    # Behind the watchdog of a server that was stopped and not yet noticed it, or a second one for the
    # same server (two commands started at once): this one takes over when that one ends.
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        watch(path, int(postmaster), socket_dir, port, psql, float(idle_seconds))
    finally:
        (path / STATE).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal that started it is not for it
    sys.exit(main(sys.argv[1:]))
