"""One PostgreSQL for a whole test run, shared by its processes (pytest-xdist workers), each process
with databases of its own cloned from one migrated template.

The first process that needs the server starts it, under a file lock, and migrates the template
database once; the others join. `CREATE DATABASE ... TEMPLATE` copies the migrated schema in tens of
milliseconds, where migrating each database would take seconds. The run's controller (the one pytest
process, or xdist's controller, which outlives its workers) stops the server and deletes its folder
at the end; the embedded server's watchdog stops it too should the run be killed before that.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from sqlalchemy import text

from models.database import create_engine, start_embedded_postgres, stop_embedded_postgres
from models.migrate import upgrade_database

TEMPLATE = "personae_template"


def url_for_database(url: str, name: str) -> str:
    """The same server's URL for another database (the path's last part, the query kept)."""
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def run_root(run_id: str) -> Path:
    """The run's folder: short (PostgreSQL's unix socket path must stay under 107 bytes) and
    world-traversable (PostgreSQL runs as another user when tests run as root); in the temporary
    directory (RAM where testkit.ram_tmp chose it: clones and TRUNCATEs create and delete files),
    /tmp where that directory's path is too long."""
    tmp = Path(tempfile.gettempdir())
    return (tmp if len(str(tmp)) <= 40 else Path("/tmp")) / f"personae-pg-{run_id[:12]}"


@dataclass(frozen=True, slots=True)
class RunCluster:
    """The run's server: `url` is an asyncpg URL of its template database."""

    url: str

    async def clone(self, name: str) -> str:
        """A database `name` (dropped first if a previous run left it) with the migrated schema."""
        return await self._create(name, template=TEMPLATE)

    async def empty(self, name: str) -> str:
        """A database `name` with no schema (for tests of migrations and of first runs)."""
        return await self._create(name, template=None)

    async def drop(self, name: str) -> None:
        await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def _create(self, name: str, *, template: str | None) -> str:
        clause = f' TEMPLATE "{template}"' if template else ""
        await self._admin(
            f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"{clause}'
        )
        return url_for_database(self.url, name)

    async def _admin(self, *statements: str) -> None:
        # From the `postgres` database: a clone fails while anyone is connected to its template.
        engine = create_engine(url_for_database(self.url, "postgres"), pool_size=1)
        try:
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                for statement in statements:
                    await connection.execute(text(statement))
        finally:
            await engine.dispose()


def join_run_cluster(root: Path, server_url: str | None = None) -> RunCluster:
    """The run's server, started (embedded, under root) and its template migrated by whichever
    process comes first; `server_url` (TEST_DATABASE_URL) names a server to use instead."""
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    with FileLock(root / "setup.lock"):
        if server_url:
            url = url_for_database(server_url, TEMPLATE)
            marker = root / "template.ready"
            if not marker.exists():
                asyncio.run(_migrated_template(RunCluster(url)))
        else:
            url = start_embedded_postgres(root, database=TEMPLATE, keep_running=True)
            marker = root / "template.ready"
            if not marker.exists():
                asyncio.run(_unsafe_and_fast(RunCluster(url)))
                asyncio.run(_migrate(url))
        marker.touch()
    return RunCluster(url)


async def _unsafe_and_fast(cluster: RunCluster) -> None:
    """No waiting on the disk: a test server's data is thrown away at the end of the run, and its
    DROP DATABASE (a checkpoint) and commits then cost milliseconds, not seconds."""
    await cluster._admin(
        "ALTER SYSTEM SET fsync = off",
        "ALTER SYSTEM SET synchronous_commit = off",
        "ALTER SYSTEM SET full_page_writes = off",
        "SELECT pg_reload_conf()",
    )


async def _migrated_template(cluster: RunCluster) -> None:
    await cluster.empty(TEMPLATE)
    await _migrate(cluster.url)


async def _migrate(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade_database(engine)
    finally:
        await engine.dispose()


def leave_run_cluster(root: Path) -> None:
    """At the end of the run: stop the embedded server (if one was started) and delete its folder."""
    if root.exists():
        stop_embedded_postgres(root)
        shutil.rmtree(root, ignore_errors=True)
