"""SIGTERM (`docker stop`, systemd, `kill`) stops a command as Ctrl-C does."""

from __future__ import annotations

import asyncio
import contextlib
import signal


def stop_on_sigterm() -> None:
    """From now on SIGTERM cancels the running task, so what it holds (the bot's connection, a
    formation pass, the index, the database) closes in order; Python's default ends the process on
    the spot, and a container's first process ignores SIGTERM until it is killed. asyncio.run then
    raises CancelledError, which the command ends on quietly."""
    task = asyncio.current_task()
    if task is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals here (not Unix, a thread)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
