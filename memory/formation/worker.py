"""`personae worker`: form memories from the message log until stopped, alongside other workers.

Workers claim conversations with an advisory lock, skipped when held (memory.formation.forming), so any
number of them can run against one database without doing the same exchange twice. What a user said
incognito (or forgot) is only marked done: a worker forms it no more than the chat path does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.formation.forming import MemoryFormation

log = logging.getLogger(__name__)


async def run_worker(
    memory: MemoryFormation, *, idle_seconds: float = 2.0, stop: asyncio.Event | None = None
) -> None:
    """Form pending memories, sleeping when there is nothing to do, until `stop` is set."""
    stop = stop or asyncio.Event()
    log.info("Memory worker started")
    while not stop.is_set():
        try:
            report = await memory.form_pending()
        except Exception:
            # One bad batch (database restart, say) must not end the worker: log, back off, retry.
            log.exception("Memory formation failed; retrying in %.0f s", idle_seconds * 5)
            await _sleep_or_stop(stop, idle_seconds * 5)
            continue
        if report.excluded:
            log.info("Left out %d messages said incognito or forgotten", report.excluded)
        if report.exchanges:
            log.info("Formed %d memories from %d exchanges", report.memories, report.exchanges)
            continue
        await _sleep_or_stop(stop, idle_seconds)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
