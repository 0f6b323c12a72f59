"""Forming one claimed conversation as a pipeline: the next batches are summarized while one is written.

Summarizing waits on the LLM; embedding, writing and indexing a batch work the CPU and the databases.
One after the other, each waits for the other, and the LLM sits idle while a batch is written. Here a
batch is handed to `write` as soon as its summaries are done, while the `ahead` batches read after it
keep summarizing: the index upsert of one batch never waits on the LLM calls of the next.

The conversation stays claimed for the whole run (the caller holds the claim), so no other pass can
read a batch in flight. Within the run, `read` is told which messages the batches in flight will mark
(`in_flight`), so it reads past them: what it reads is what it would read once they are marked.

Batches are written in the order they were read, never out of it: a batch read while an earlier one
was in flight counted on that one's messages being marked (a late reply to a message in flight forms
an exchange of its own), so it is written only once that one is. Any error stops the run: the batches
not written are dropped, their summaries cancelled, and their messages stay pending for the next pass.

The run also ends once it has read for `seconds`, so a claim (and the transaction holding it) never
stays open for a whole import; the caller claims again, at the cost of one drain of the pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Generic, TypeVar

Formed = TypeVar("Formed")

# Batches summarizing while one is written: one keeps the LLM busy across a batch's write; a second
# covers a batch whose slowest summary (a call retried after a 429) holds up its write. More only
# queue behind the LLM limit (bench.ingest's default row: 63/s with 1, 77 with 2, 69-81 with 3, 65
# with 4, the process's CPU then in full use).
AHEAD = 2
# Each claim ends in a drain: its last batches are written while none is summarized. Against a
# provider taking 8 calls at once a drain idled it ~1 s, a tenth of a 10 s claim; 30 s makes that a
# thirtieth, and a claim's transaction (an advisory lock, no row locked) stays short all the same.
CLAIM_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class BatchRead(Generic[Formed]):
    """A batch `read` found: the messages its write marks done (never none: a batch that marks nothing
    would be read again and again), and its forming (summaries) to await."""

    marks: frozenset[str]
    forming: Awaitable[Formed]


ReadStage = Callable[[Collection[str]], Awaitable["BatchRead[Formed] | None"]]
WriteStage = Callable[[Formed], Awaitable[None]]


async def run_pipeline(
    read: ReadStage[Formed],
    write: WriteStage[Formed],
    *,
    ahead: int = AHEAD,
    seconds: float = CLAIM_SECONDS,
) -> int:
    """Read batches (given the messages in flight) and write each once formed; returns how many were
    written. `read` returns None when nothing is left; its forming starts at once, as a task.
    `ahead` batches summarize while one is written; 0 runs the stages one after the other."""
    in_flight: set[str] = set()
    queue: deque[tuple[frozenset[str], asyncio.Task[Formed]]] = deque()
    deadline = time.monotonic() + seconds
    done_reading = False
    written = 0

    async def refill(up_to: int) -> None:
        nonlocal done_reading
        while not done_reading and len(queue) < up_to:
            late = (written or queue) and time.monotonic() >= deadline  # the first read always happens
            found = None if late else await read(frozenset(in_flight))
            if found is None:
                done_reading = True
                return
            in_flight.update(found.marks)
            queue.append((found.marks, asyncio.ensure_future(found.forming)))

    try:
        while True:
            await refill(max(ahead, 1))
            if not queue:
                return written
            marks, forming = queue[0]
            formed = await forming
            queue.popleft()
            await refill(ahead)  # the next batches start summarizing before this one is written
            await write(formed)
            in_flight.difference_update(marks)
            written += 1
    finally:
        for _, task in queue:
            task.cancel()
        await asyncio.gather(*(task for _, task in queue), return_exceptions=True)
