"""The process holding the embedded index answers `recall` and the memory commands for the others
(bot.cli.index_client says why): on a Unix socket in the data directory, readable by this user only,
each request parsed by the same parser and run by the same handler on this process's runtime, its
output captured (bot.cli.routed_output) and sent back with its exit code."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli.index_client import command_socket, reachable_path, served_by_holder
from bot.cli.output import ArgumentError, CommandError, one_line
from bot.cli.routed_output import captured_output, routed_output

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger(__name__)

REQUEST_LIMIT = 1 << 20  # bytes of one request (a command line, a directory)


@asynccontextmanager
async def serving_index_commands(runtime: Runtime) -> AsyncIterator[None]:
    """Answer other processes' recall and memory commands while this lasts; nothing to do when the
    index is a Qdrant server (every process opens it)."""
    if runtime.settings.qdrant_url:
        yield
        return
    path = command_socket(runtime.settings.personae_data_dir)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _answer(runtime, reader, writer)

    # Bound under a name of its own, made 0600 and listening, then renamed into place: an asker never
    # finds it open to others or not yet listening. This process holds the index, so a socket left at
    # `path` was a holder's that is gone: the rename replaces it.
    unready = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        with reachable_path(unready) as where, reachable_path(path) as final:
            server = await asyncio.start_unix_server(answer, path=where, limit=REQUEST_LIMIT)
            try:
                os.chmod(where, 0o600)
                os.rename(where, final)
                bound = os.stat(final).st_ino
            except OSError:
                server.close()
                with suppress(OSError):
                    os.unlink(where)
                raise
    except OSError as exc:  # a courtesy: without it, other processes find the index busy, as before
        log.warning("Cannot answer other processes' commands on %s: %s", path, exc)
        yield
        return
    try:
        with routed_output():
            yield
    finally:
        server.close()
        with suppress(OSError), reachable_path(path) as where:
            if os.stat(where).st_ino == bound:  # still ours, not a later holder's
                os.unlink(where)
        await server.wait_closed()


async def _answer(runtime: Runtime, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request: a command line in, its output and exit code out."""
    try:
        if not _same_user(writer):
            return
        request = json.loads(await reader.readline())
        answer = await run_for_another_process(
            runtime, [str(word) for word in request["argv"]], Path(request["cwd"]), tty=bool(request["tty"])
        )
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
    except (ValueError, KeyError, TypeError) as exc:  # not a request of ours
        log.warning("An unreadable request on the index's command socket: %s", exc)
    except ConnectionError:  # the asker went away (Ctrl-C): its answer has nobody to go to
        log.info("A process asked for a command and left before its answer")
    finally:
        writer.close()
        with suppress(ConnectionError):
            await writer.wait_closed()


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """Whether the asker runs as this process's user (the socket's 0600 says so too; this checks)."""
    connection: socket.socket = writer.get_extra_info("socket")
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    uid = int.from_bytes(credentials[4:8], sys.byteorder)  # struct ucred: pid, uid, gid
    return uid == os.getuid()


async def run_for_another_process(
    runtime: Runtime, argv: list[str], cwd: Path, *, tty: bool
) -> dict[str, Any]:
    """`personae ARGV` typed in `cwd`, run here: what it printed and its exit code, as bot.cli.app
    would have printed and returned them."""
    with captured_output(tty) as captured:
        status = await _run(runtime, argv, cwd)
    return {"stdout": captured.stdout.getvalue(), "stderr": captured.stderr.getvalue(), "status": status}


async def _run(runtime: Runtime, argv: list[str], cwd: Path) -> int:
    from memory.errors import UserFacingError
    from memory.retry import LLMUnavailableError

    try:
        args = served_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage and the error (or the help)
        return exc.code if isinstance(exc.code, int) else 2
    if not served_by_holder(args):
        print("personae: This process answers only recall and the memory commands.", file=sys.stderr)
        return 2
    _from_directory(args, cwd)
    try:
        if (check_arguments := getattr(args, "check_arguments", None)) is not None:
            check_arguments(args)
        await args.handler(args, runtime)
    except SystemExit as exc:  # a command's own exit status (`reindex --check`'s 1): never this process's
        return exc.code if isinstance(exc.code, int) else 1
    except ArgumentError as exc:
        print(f"personae: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except (CommandError, UserFacingError, LLMUnavailableError) as exc:
        print(f"personae: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:
        log.exception("A command run for another process failed: %s", argv)
        print(
            f"personae: The process holding the index (pid {os.getpid()}) failed to run the command "
            f"({type(exc).__name__}); its log says why.",
            file=sys.stderr,
        )
        return 1
    return 0


def served_parser() -> argparse.ArgumentParser:
    """`personae`'s parser for the commands served (bot.cli.app's whole tree would import the chat)."""
    from bot.cli import memories

    parser = argparse.ArgumentParser(prog="personae")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details; list everything")
    memories.add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def _from_directory(args: argparse.Namespace, cwd: Path) -> None:
    """Relative file arguments (--queries-file) taken from the directory the command was typed in."""
    for name, value in vars(args).items():
        if isinstance(value, Path) and not value.is_absolute():
            setattr(args, name, cwd / value)
