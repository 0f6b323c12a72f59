"""Background work of the bot: one place that starts it, keeps it referenced, and logs its failures.

asyncio keeps only a weak reference to a task, so a task nobody holds can vanish mid-run, and an
exception nobody retrieves surfaces as "Task exception was never retrieved" at garbage collection.
Every background coroutine of the bot goes through `BackgroundTasks.spawn` instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class BackgroundTasks:
    """The bot's background tasks: spawned, tracked, failures logged, drained or cancelled on close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coroutine: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coroutine` in the background; a failure is logged with its task name."""
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("Background task %s failed", task.get_name(), exc_info=error)

    async def drain(self, *, keep_running: tuple[str, ...] = ()) -> None:
        """Wait until the tasks in flight (and any they spawn) are done, except those named in
        `keep_running` (loops that never end on their own)."""
        while pending := [t for t in self._tasks if t.get_name() not in keep_running]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def cancel_all(self) -> None:
        """Cancel every task and wait for them to finish cancelling."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
