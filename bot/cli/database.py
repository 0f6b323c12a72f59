"""`personae db`: the database schema, and the life of the embedded PostgreSQL.

The embedded server starts with the first command that needs it and keeps running afterwards, so
the next command starts at once, until it has had no client for EMBEDDED_POSTGRES_IDLE_MINUTES (its
watchdog, models/pg_watchdog.py, stops it); `db stop` stops it now, `db status` says whether it runs
and when it will stop.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from bot.cli.output import CommandError, command_group

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core
    from bot.settings import BotSettings
    from models.database import Watchdog


def add_commands(commands: Subcommands) -> None:
    db = command_group(commands, "db", "the database: schema, and the embedded PostgreSQL's status and stop")
    db.add_parser("upgrade", help="apply migrations up to the newest schema").set_defaults(
        handler=cmd_db_upgrade
    )
    db.add_parser(
        "status", help="where the database is, whether the embedded PostgreSQL runs, the schema's revision"
    ).set_defaults(standalone=cmd_db_status)
    stop = db.add_parser(
        "stop",
        help="stop the embedded PostgreSQL (the next command starts it again)",
        description="Stop the embedded PostgreSQL, which otherwise keeps running between commands.",
    )
    stop.add_argument(
        "--force", action="store_true", help="stop it even while other processes (the bot, a chat) use it"
    )
    stop.set_defaults(standalone=cmd_db_stop)


async def cmd_db_upgrade(args: argparse.Namespace, core: Core) -> None:
    """Opening the Core migrated the database; this reports where it stands."""
    from models.migrate import current_revision

    print(f"Database schema at revision {await current_revision(core.engine)} (head).")


def cmd_db_status(args: argparse.Namespace, settings: BotSettings) -> int:
    from models.database import embedded_watchdog, running_embedded_postgres

    if settings.database_url:
        from sqlalchemy.engine import make_url

        shown = make_url(settings.database_url).render_as_string(hide_password=True)
        print(f"database: DATABASE_URL, {shown}")
        url = settings.database_url
    else:
        server = running_embedded_postgres(settings.personae_data_dir)
        where = (settings.personae_data_dir / "postgres").resolve()
        if server is None:
            print(f"database: the embedded PostgreSQL in {where}, not running (the next command starts it)")
            return 0
        print(
            f"database: the embedded PostgreSQL in {where}, running (pid {server.pid}, "
            f"since {server.started_at:%Y-%m-%d %H:%M} UTC); `personae db stop` stops it"
        )
        print(f"stops:    {_when_it_stops(embedded_watchdog(settings.personae_data_dir))}")
        url = server.url()
    print(f"schema:   {asyncio.run(_schema_revision(url))}")
    if (aside := asyncio.run(_set_aside(url))) is not None:
        print(f"memories: {aside} set aside (could not be indexed, see the log; `personae reindex` retries)")
    return 0


async def _set_aside(url: str) -> int | None:
    """Memories that could not be indexed (issue 33); None before the schema exists."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from models.database import asyncpg_url, create_engine

    engine = create_engine(asyncpg_url(url))
    try:
        async with engine.connect() as connection:
            return int(
                await connection.scalar(text("SELECT count(*) FROM memories WHERE state = 'set_aside'")) or 0
            )
    except DBAPIError:
        return None
    finally:
        await engine.dispose()


def _when_it_stops(watchdog: Watchdog | None) -> str:
    if watchdog is None or watchdog.idle_seconds <= 0:
        return "when `personae db stop` stops it"
    seconds = watchdog.idle_seconds
    minutes = seconds / 60
    quiet = f"{minutes:g} minute{'' if minutes == 1 else 's'}" if minutes.is_integer() else f"{seconds:g} s"
    spell = f"{quiet} with no client"
    if watchdog.stops_at is None:
        return f"by itself after {spell}; clients are connected now"
    return f"by itself at {watchdog.stops_at:%Y-%m-%d %H:%M:%S} UTC ({spell}) unless a client connects"


async def _schema_revision(url: str) -> str:
    import migrations
    from models.database import asyncpg_url, create_engine
    from models.migrate import current_revision

    engine = create_engine(asyncpg_url(url))
    try:
        revision = await current_revision(engine)
    finally:
        await engine.dispose()
    if revision is None:
        return "empty (any command creates it)"
    newest = "the newest" if revision == migrations.HEAD else "`personae db upgrade` brings it up to date"
    return f"revision {revision} ({newest})"


def cmd_db_stop(args: argparse.Namespace, settings: BotSettings) -> int:
    from models.database import running_embedded_postgres, stop_embedded_postgres

    if settings.database_url:
        raise CommandError("DATABASE_URL is set: that PostgreSQL is not Personae's to stop")
    where = (settings.personae_data_dir / "postgres").resolve()
    server = running_embedded_postgres(settings.personae_data_dir)
    if server is not None and not args.force:
        others = asyncio.run(_other_connections(server.url()))
        if others:
            raise CommandError(
                f"{others} other connection(s) to the embedded PostgreSQL are open (the bot, a chat or "
                "another command): stop them first, or pass --force to close them"
            )
    stopped = stop_embedded_postgres(settings.personae_data_dir)
    print(f"Stopped the embedded PostgreSQL in {where}." if stopped else f"No PostgreSQL runs in {where}.")
    return 0


async def _other_connections(url: str) -> int:
    """Client connections to the server other than this one."""
    from sqlalchemy import text

    from models.database import create_engine

    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            query = text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
            return int(await connection.scalar(query) or 0)
    finally:
        await engine.dispose()
