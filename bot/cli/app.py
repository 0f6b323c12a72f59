"""The argument tree of `personae` and its one entry point: settings, logging, the runtime, exit codes.

Each command declares what it runs on. `handler` (async) gets the Core (PostgreSQL and the services
over it); with `with_memory` the whole Runtime, the vector index opened at once (a command that
writes or searches memories fails before it starts when another process holds the embedded index);
with `index_when_used` the Runtime whose index opens only if the command comes to use it (a report
that reads PostgreSQL runs beside the bot). `embeds` starts loading the embedding model at once, while
the database is reached. `warms_llm` loads the model client in a thread from the start (bot.cli.warm_up).
`standalone` commands (run, sync-commands, db status|stop) get the settings
and build what they need. A command that holds the index a long while (`serves_index`: the terminal
chat, the worker) answers the recall and memory commands of other processes meanwhile
(bot.cli.index_holder); those commands go to it when it is there (bot.cli.index_client).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from bot.cli import chat, database, demo, discord_bot, llm_configs, memories, personalities, personas
from bot.cli.logs import configure_logging
from bot.cli.output import ArgumentError, CommandError, one_line, printable_output, undecodable_argument
from bot.cli.stopping import stop_on_sigterm
from bot.disk_full import disk_full_message

if TYPE_CHECKING:
    from bot.settings import BotSettings

# What a program that SIGPIPE ended exits with (128 + 13): `personae recall ... | head` ends as `cat` would.
BROKEN_PIPE_EXIT = 141


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="personae", description="Discord AI personalities with long-term memory."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details; list everything")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The order of `personae --help`.
    for group in (database, personalities, personas, discord_bot, llm_configs, memories, chat, demo):
        group.add_commands(commands)
    _describe_commands(parser)
    return parser


def _describe_commands(parser: argparse.ArgumentParser) -> None:
    """Give each command without a description of its own its one-line help, so that `personae
    COMMAND --help` says what the command does, as `personae --help` does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                if not command.description and helps.get(name):
                    command.description = one_line(str(helps[name]))
                _describe_commands(command)


async def run_handler(args: argparse.Namespace, settings: BotSettings) -> None:
    """Open what the command runs on (the Core, or the Runtime over it) and run it."""
    from bot.runtime import make_deployment_embedder, open_core, open_memory_services

    stop_on_sigterm()
    if getattr(args, "warms_llm", False):  # loaded while the database and the index open
        from bot.cli.warm_up import ModelClientWarmUp

        args.model_client = ModelClientWarmUp(settings.chat_model)

    with_memory = getattr(args, "with_memory", False)
    index_when_used = getattr(args, "index_when_used", False)
    embedder = None
    if with_memory or index_when_used:
        # Loading the model (~0.2 s) overlaps reaching the database when the command will embed.
        embedder = make_deployment_embedder(settings, load_now=getattr(args, "embeds", False))
    async with open_core(settings) as core:
        if embedder is None:
            collect_garbage_from_now()
            await args.handler(args, core)
            return
        # `personae reindex` (not --check) refills the index from PostgreSQL: it may start a damaged one.
        rebuild = getattr(args, "rebuilds_index", False) and not getattr(args, "check", False)
        async with open_memory_services(
            core, embedder=embedder, rebuild_index=rebuild, index_when_used=not with_memory
        ) as runtime:
            collect_garbage_from_now()
            if not getattr(args, "serves_index", False):
                await args.handler(args, runtime)
                return
            from bot.cli.index_holder import serving_index_commands

            async with serving_index_commands(runtime):
                await args.handler(args, runtime)


def explain_connection_error(exc: BaseException, settings: BotSettings) -> str | None:
    """One line for the database being unreachable, instead of a driver traceback."""
    from sqlalchemy.exc import DBAPIError

    # SQLAlchemy wraps the driver's error twice (its DBAPIError, then the asyncpg adapter's own
    # class, whose cause is asyncpg's error): the connection's fate is somewhere down that chain.
    for cause in _causes(exc):
        invalidated = isinstance(cause, DBAPIError) and cause.connection_invalidated
        if invalidated or isinstance(cause, OSError | ConnectionError) or _asyncpg_connection_error(cause):
            root = list(_causes(cause))[-1]
            detail = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
            if settings.database_url:
                fix = "Check that the server is running and the URL is right."
                return f"Cannot reach DATABASE_URL: {detail}. {fix}"
            fix = "Run `personae db stop`, then the command again, to restart it."
            return f"Cannot reach the embedded PostgreSQL: {detail}. {fix}"
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


def _broken_pipe() -> int:
    """The reader of our output went away (`| head`): end quietly, as `cat` would."""
    # Python flushes stdout again at exit, which would raise and print the error after all.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    # Python's last garbage collection at exit takes apart every object the command made (~0.2 s
    # of a cold `personae recall`); frozen objects are left alone and their memory goes back whole.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    # Start-up (imports, settings, the services built) makes ~100,000 objects that live as long as
    # the command and almost no garbage: the collector's ~240 passes over them cost ~60 ms of a cold
    # recall. It runs from the command's own work on, over what that makes (`collect_garbage_from_now`).
    gc.disable()
    try:
        with printable_output():  # no text from a card, a model or a memory drives the terminal
            return _run_command(argv)
    finally:
        gc.unfreeze()  # a caller that goes on (a test) gets its garbage collected as before
        gc.enable()


def collect_garbage_from_now() -> None:
    """Start-up is over: collect garbage again, leaving what start-up made out of the passes."""
    gc.freeze()
    gc.enable()


def _stopped(args: argparse.Namespace, signal_name: str, status: int) -> int:
    """A command that says how it was stopped (its `when_stopped`) does so and exits `status`; 0 else."""
    said = getattr(args, "when_stopped", None)
    if said is None:
        return 0
    print(f"personae: {said} ({signal_name}).", file=sys.stderr)
    return status


def _run_command(argv: Sequence[str] | None) -> int:
    if (undecodable := undecodable_argument(sys.argv[1:] if argv is None else argv)) is not None:
        print(f"personae: {undecodable}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:  # what argparse cannot check alone, before anything opens
        if (check_arguments := getattr(args, "check_arguments", None)) is not None:
            check_arguments(args)
    except ArgumentError as exc:
        print(f"personae: {one_line(str(exc))}", file=sys.stderr)
        return 2
    from bot.settings import load_bot_settings
    from memory.errors import UserFacingError
    from memory.retry import LLMUnavailableError
    from memory.settings import SettingsError

    try:
        settings = load_bot_settings()
    except SettingsError as exc:
        print(f"personae: {one_line(str(exc))}", file=sys.stderr)
        return 2
    log_file = getattr(args, "log_file", None)  # the command's own log file, made from the settings
    configure_logging(
        settings,
        verbose=args.verbose,
        long_running=getattr(args, "long_running", False),
        log_file=log_file(settings) if log_file is not None else None,
    )
    try:
        standalone = getattr(args, "standalone", None)
        if standalone is not None:
            collect_garbage_from_now()
            return int(standalone(args, settings))
        from bot.cli.index_client import ask_index_holder

        forwarded = ask_index_holder(args, sys.argv[1:] if argv is None else argv, settings)
        if forwarded is not None:
            return forwarded
        asyncio.run(run_handler(args, settings))
        sys.stdout.flush()  # a broken pipe shows here, while it can still be handled
    except BrokenPipeError:
        return _broken_pipe()
    except (CommandError, UserFacingError, LLMUnavailableError) as exc:  # each says itself in one line
        print(f"personae: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _stopped(args, "Ctrl-C", 130) or 130
    except asyncio.CancelledError:  # SIGTERM (stop_on_sigterm): asked to stop, and stopped in order
        return _stopped(args, "SIGTERM", 143)
    except Exception as exc:
        # A full disk first: its OSError would otherwise read as the database being out of reach.
        explained = disk_full_message(
            exc, settings.personae_data_dir, database_url=bool(settings.database_url)
        ) or explain_connection_error(exc, settings)
        if explained is None:
            raise
        print(f"personae: {explained}", file=sys.stderr)
        return 1
    return 0
