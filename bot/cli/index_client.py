"""`personae recall` and `personae memory ...` while another process holds the embedded index.

Qdrant Edge is opened by one process at a time (memory.recall.edge), and qdrant-edge-py has no read-only
open. So the process that holds it (a terminal chat, the bot, a worker) answers these commands for the
others on a Unix socket in the data directory (bot.cli.index_holder): the request is the command line
and the directory it was typed in, the answer the command's output and exit code, exactly what the
command prints when it runs alone. No socket, or none listening (its holder gone), and the command
runs here as before; a holder that stops before answering, or never answers, is one line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli.output import CommandError

if TYPE_CHECKING:
    from bot.settings import BotSettings

SOCKET_NAME = "index-commands.sock"
# The commands a holder answers: those that read or change memories through the index.
SERVED_COMMANDS = ("recall", "memory")
# Seconds for an answer: a recall takes well under one; a holder this late is hung or stopped.
ANSWER_WAIT = 120
_PATH_ROOM = 100  # bytes of a Unix socket's path (108 with its end), with room to spare


def command_socket(data_dir: Path) -> Path:
    """Where the process holding the embedded index under `data_dir` answers commands."""
    return data_dir / SOCKET_NAME


def served_by_holder(args: argparse.Namespace) -> bool:
    """Whether the command goes through the index's holder: a recall or memory command that uses the index."""
    uses_index = getattr(args, "with_memory", False) or getattr(args, "index_when_used", False)
    return args.command in SERVED_COMMANDS and bool(uses_index)


@contextmanager
def reachable_path(path: Path) -> Iterator[str]:
    """`path` as a socket can be bound or reached at: a path too long for one (a deep data directory)
    is reached through a descriptor of its directory, /proc/self/fd/N/NAME (Linux)."""
    if len(os.fsencode(path)) <= _PATH_ROOM:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def ask_index_holder(args: argparse.Namespace, argv: Sequence[str], settings: BotSettings) -> int | None:
    """Run the command in the process holding the index, print what it printed and return its exit code;
    None when no process answers for the index (run the command here)."""
    if settings.qdrant_url or not served_by_holder(args):  # a Qdrant server is shared: nothing is held
        return None
    connection = _connect(command_socket(settings.personae_data_dir))
    if connection is None:
        return None
    with connection:
        holder = _peer_pid(connection)
        request = {"argv": list(argv), "cwd": os.getcwd(), "tty": sys.stdout.isatty()}
        try:
            connection.sendall(json.dumps(request).encode() + b"\n")
            answer = _read_answer(connection)
        except TimeoutError:
            raise CommandError(
                f"The process holding the vector index (pid {holder}) did not answer within {ANSWER_WAIT} "
                "seconds; it may be stopped or hung."
            ) from None
        except OSError:
            answer = None
    if answer is None:
        raise CommandError(
            f"The process holding the vector index (pid {holder}) stopped before answering; run the "
            "command again."
        )
    sys.stdout.write(answer["stdout"])
    sys.stdout.flush()
    sys.stderr.write(answer["stderr"])
    return int(answer["status"])


def _connect(path: Path) -> socket.socket | None:
    """A connection to the holder's socket; None when there is none, or nobody listens on it."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_WAIT)
    try:
        with reachable_path(path) as where:
            connection.connect(where)
    except OSError:  # no socket, its holder gone (refused), or not ours (denied): not served
        connection.close()
        return None
    return connection


def _peer_pid(connection: socket.socket) -> int:
    """The pid of the process at the other end (SO_PEERCRED: pid, uid, gid)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[:4], sys.byteorder)


def _read_answer(connection: socket.socket) -> dict[str, Any] | None:
    """The holder's answer, or None when the connection ended before a whole one."""
    received = bytearray()
    while chunk := connection.recv(65536):
        received += chunk
    try:
        answer = json.loads(received)
    except ValueError:
        return None
    fields = {"stdout": str, "stderr": str, "status": int}
    if not isinstance(answer, dict) or any(not isinstance(answer.get(k), t) for k, t in fields.items()):
        return None
    return answer
