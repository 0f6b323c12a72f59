"""The argument tree of `personae` and its one entry point: settings, logging, the runtime, exit codes.

Each command declares what it runs on: `handler` (async) gets the Core, or with `with_memory` the whole
Runtime; `standalone` commands (run, sync-commands) get the settings and build what they need.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from bot.cli import chat, database, demo, discord_bot, llm_configs, memories, personalities
from bot.cli.logs import configure_logging
from bot.cli.output import CommandError

if TYPE_CHECKING:
    from bot.settings import BotSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="personae", description="Discord AI personalities with long-term memory."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The order of `personae --help`.
    for group in (database, personalities, discord_bot, llm_configs, memories, chat, demo):
        group.add_commands(commands)
    return parser


async def run_handler(args: argparse.Namespace, settings: BotSettings) -> None:
    """Open what the command runs on (the Core, or the whole Runtime) and run it."""
    from bot.runtime import open_core, open_runtime

    if getattr(args, "with_memory", False):
        # `personae reindex` (not --check) refills the index from PostgreSQL: it may start a damaged one.
        rebuild = getattr(args, "rebuilds_index", False) and not getattr(args, "check", False)
        async with open_runtime(settings, rebuild_index=rebuild) as runtime:
            await args.handler(args, runtime)
    else:
        async with open_core(settings) as core:
            await args.handler(args, core)


def explain_connection_error(exc: BaseException, settings: BotSettings) -> str | None:
    """One line for the database being unreachable, instead of a driver traceback."""
    from sqlalchemy.exc import DBAPIError

    # SQLAlchemy wraps the driver's error twice (its DBAPIError, then the asyncpg adapter's own
    # class, whose cause is asyncpg's error): the connection's fate is somewhere down that chain.
    for cause in _causes(exc):
        invalidated = isinstance(cause, DBAPIError) and cause.connection_invalidated
        if invalidated or isinstance(cause, OSError | ConnectionError) or _asyncpg_connection_error(cause):
            where = "DATABASE_URL" if settings.database_url else "the embedded PostgreSQL"
            root = list(_causes(cause))[-1]
            detail = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
            return f"Cannot reach {where}: {detail}. Check that the server is running and the URL is right."
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The error, then what it wraps (`orig`) or was raised from, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__


def _asyncpg_connection_error(exc: BaseException) -> bool:
    """asyncpg's errors about the connection or the server going away, not about a statement."""
    name = type(exc).__name__
    closed = name == "InterfaceError" and "connection" in str(exc).lower()
    return type(exc).__module__.startswith("asyncpg") and (
        closed or any(word in name for word in ("Connect", "Connection", "Shutdown"))
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from bot.settings import load_bot_settings
    from memory.errors import UserFacingError
    from memory.retry import LLMUnavailableError
    from memory.settings import SettingsError

    try:
        settings = load_bot_settings()
    except SettingsError as exc:
        print(f"personae: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings, verbose=args.verbose, long_running=getattr(args, "long_running", False))
    try:
        standalone = getattr(args, "standalone", None)
        if standalone is not None:
            return int(standalone(args, settings))
        asyncio.run(run_handler(args, settings))
    except (CommandError, UserFacingError, LLMUnavailableError) as exc:  # each says itself in one line
        print(f"personae: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        explained = explain_connection_error(exc, settings)
        if explained is None:
            raise
        print(f"personae: {explained}", file=sys.stderr)
        return 1
    return 0
