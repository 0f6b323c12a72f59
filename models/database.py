"""The async engine and session factory, and the embedded PostgreSQL used when no URL is set."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "personae"
# How long the embedded PostgreSQL stays up with no client before its watchdog stops it (a setting:
# EMBEDDED_POSTGRES_IDLE_MINUTES); 0 keeps it up until `personae db stop`.
DEFAULT_IDLE_MINUTES = 10.0
_WATCHDOG = Path(__file__).with_name("pg_watchdog.py")


def asyncpg_url(url: str) -> str:
    """A PostgreSQL URL as users write it (postgres://, postgresql://) with the asyncpg driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    if not url.startswith("postgresql+asyncpg://"):
        raise ValueError("must start with postgresql:// (for example postgresql://user:pw@host/db)")
    return url


def create_engine(url: str, *, pool_size: int = 5) -> AsyncEngine:
    """An asyncpg engine; pre-ping so a restarted database does not fail the first query."""
    return create_async_engine(url, pool_size=pool_size, max_overflow=10, pool_pre_ping=True)


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions whose objects stay usable after commit, for returning plain values from services."""
    return async_sessionmaker(engine, expire_on_commit=False)


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """The embedded PostgreSQL running for a data directory, as its `postmaster.pid` describes it."""

    pid: int
    pgdata: Path
    socket_dir: Path
    port: int
    started_at: datetime

    def url(self, database: str = EMBEDDED_DATABASE) -> str:
        """An asyncpg URL for `database` on this server, through its unix socket (pgserver's form)."""
        return f"postgresql+asyncpg://postgres:@/{database}?host={self.socket_dir}"


def _pgdata(data_dir: Path) -> Path:
    return (data_dir / "postgres").resolve()


def _postmaster(pgdata: Path) -> tuple[list[str], int | None]:
    """The lines of `postmaster.pid` and its pid; no lines when there is no such file."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return [], None
    try:
        return lines, int(lines[0])
    except (IndexError, ValueError):
        return lines, None


def _ready(lines: list[str]) -> bool:
    # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shared memory, status.
    return len(lines) >= 8 and lines[7].strip() == "ready"


def _is_postmaster(pid: int, pgdata: Path) -> bool:
    """Whether `pid` is a live PostgreSQL server of `pgdata` (not a process that reused the pid)."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").is_dir():
        # Linux: the two files psutil reads there, without its import (~15 ms of every command).
        try:
            name = (proc / "comm").read_text().strip()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # no such process, or not ours to see
            return False
        return name == "postgres" and os.fsencode(pgdata) in args
    import psutil

    try:
        process = psutil.Process(pid)
        return process.name() == "postgres" and str(pgdata) in process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def running_embedded_postgres(data_dir: Path) -> EmbeddedServer | None:
    """The embedded PostgreSQL of `data_dir` if it runs and accepts connections, without starting it."""
    pgdata = _pgdata(data_dir)
    lines, pid = _postmaster(pgdata)
    if pid is None or not _ready(lines) or not _is_postmaster(pid, pgdata):
        return None
    socket_dir = Path(lines[4].strip())
    port = int(lines[3].strip())
    if not (socket_dir / f".s.PGSQL.{port}").exists():
        return None
    return EmbeddedServer(pid, pgdata, socket_dir, port, datetime.fromtimestamp(int(lines[2]), UTC))


def start_embedded_postgres(
    data_dir: Path,
    database: str = EMBEDDED_DATABASE,
    *,
    keep_running: bool = False,
    idle_minutes: float = DEFAULT_IDLE_MINUTES,
) -> str:
    """The asyncpg URL of `database` on the embedded PostgreSQL under data_dir, started if needed.

    One server per data directory is shared by every process of this machine. `keep_running`: it
    stays up after this process exits, so the next command starts at once (`personae db stop` stops
    it); otherwise a server this call starts stops when the last process that joined it exits
    (pgserver's way, for throwaway servers). A server left by a crash, or a `postmaster.pid` whose
    pid now belongs to another process, is cleared and the server started afresh.
    """
    running = running_embedded_postgres(data_dir)
    if running is not None:
        return running.url(database)
    pgdata = _pgdata(data_dir)
    lines, pid = _postmaster(pgdata)
    if pid is not None and _ready(lines) and _is_postmaster(pid, pgdata):
        # Up, yet its socket is gone (a cleaner emptied its directory): no one can reach it; restart it.
        log.warning("The embedded PostgreSQL in %s lost its socket; restarting it", pgdata)
        stop_embedded_postgres(data_dir)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its /tmp fallback is fine.
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server  # tens of ms; paid when the server is not up

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        log.debug("Starting embedded PostgreSQL in %s", pgdata)
        _clear_stale_lock(pgdata)
        server = get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    running = running_embedded_postgres(data_dir)
    if running is None:
        raise RuntimeError(f"The embedded PostgreSQL in {pgdata} did not start; its log is {pgdata / 'log'}")
    _watch(running, idle_minutes)
    return running.url(database)


@dataclass(frozen=True, slots=True)
class Watchdog:
    """What the watchdog of a running embedded PostgreSQL last saw."""

    idle_seconds: float  # 0: it never stops the server for being idle
    idle_since: datetime | None  # when its last client left; None while one is connected

    @property
    def stops_at(self) -> datetime | None:
        """When it stops the server unless a client connects first."""
        if self.idle_seconds <= 0 or self.idle_since is None:
            return None
        return self.idle_since + timedelta(seconds=self.idle_seconds)


def embedded_watchdog(data_dir: Path) -> Watchdog | None:
    """The watchdog of data_dir's embedded PostgreSQL, if one runs and has looked at least once."""
    pgdata = _pgdata(data_dir)
    try:
        state = json.loads((pgdata / "personae-watchdog.json").read_text())
        args = Path(f"/proc/{int(state['pid'])}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if os.fsencode(_WATCHDOG.name) not in args or os.fsencode(pgdata) not in args.split(b"\0"):
        return None
    since = state.get("idle_since")
    return Watchdog(
        float(state["idle_seconds"]), None if since is None else datetime.fromtimestamp(float(since), UTC)
    )


def _watch(server: EmbeddedServer, idle_minutes: float) -> None:
    """Start the server's watchdog unless one runs (it detaches: this returns once it has forked)."""
    if os.name != "posix" or embedded_watchdog(server.pgdata.parent) is not None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH

    argv = [str(server.pgdata), str(server.pid), str(server.socket_dir), str(server.port)]
    argv += [str(POSTGRES_BIN_PATH / "psql"), str(max(0.0, idle_minutes) * 60)]
    subprocess.run(
        [sys.executable, str(_WATCHDOG), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=60,
    )


def _clear_stale_lock(pgdata: Path) -> None:
    """Remove a `postmaster.pid` that no live server of this directory holds: PostgreSQL itself refuses
    to start while the pid it names is alive, even when that pid now belongs to another process."""
    lines, pid = _postmaster(pgdata)
    if lines and (pid is None or not _is_postmaster(pid, pgdata)):
        log.warning("Removing the stale lock of a PostgreSQL that is no longer running in %s", pgdata)
        (pgdata / "postmaster.pid").unlink(missing_ok=True)


def stop_embedded_postgres(data_dir: Path) -> EmbeddedServer | None:
    """Stop the embedded PostgreSQL of data_dir (a fast shutdown: open connections are closed);
    the server that was running, or None when none was."""
    pgdata = _pgdata(data_dir)
    _, pid = _postmaster(pgdata)
    if pid is None or not _is_postmaster(pid, pgdata):
        return None
    server = running_embedded_postgres(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver import pg_ctl  # type: ignore[attr-defined]  # made at import, one per binary

        try:
            # pg_ctl runs as the data directory's owner (pgserver's own user when we are root).
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_owner(pgdata), timeout=60)
        except subprocess.CalledProcessError:
            if _is_postmaster(pid, pgdata):
                raise
    return server or EmbeddedServer(pid, pgdata, pgdata, 0, datetime.now(UTC))


def _owner(pgdata: Path) -> str | None:
    """The user that runs the server (pgserver runs it as its own user when we are root), or None."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    import pwd

    return pwd.getpwuid(pgdata.stat().st_uid).pw_name
